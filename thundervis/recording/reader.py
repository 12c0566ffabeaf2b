"""Reading a recording: plain dataclasses, the only way views, commands and tests read one.

:func:`open_recording` refuses, with one sentence in a :class:`RecordingError`, a file that does not
exist, is not a thundervis recording, is truncated or corrupted, or was written with a newer schema.
Every later query turns SQLite errors into :class:`RecordingError` too. The reader only reads data:
trace JSON is loaded by the compiler's validating loader, nothing is unpickled or executed.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import struct
from dataclasses import dataclass, field
from typing import Optional, Union
from urllib.parse import quote

from thundervis.compiler.ir import SourceInfo, Trace
from thundervis.compiler.printer import header_line
from thundervis.compiler.serialize import TraceFormatError, trace_from_json

from .liveness import last_recorded, run_status
from .schema import APPLICATION_ID, INSERT_SYMBOL_ROW, SCHEMA_VERSION
from .trace_text import symbol_rows

SQLITE_MAGIC = b"SQLite format 3\x00"
CHAIN_ORDER = ("dynamo", "joint", "forward", "backward", "inference")


class RecordingError(Exception):
    """The file cannot be read as a recording; the message is one sentence for the user."""


class UnknownItem(LookupError):
    """A graph, chain, pass or symbol that the recording does not hold; the message names the
    valid choices."""


@dataclass(frozen=True)
class Run:
    """What ran: script or module, argv, cwd, versions, device, times, status and traceback."""

    script: Optional[str]
    module: Optional[str]
    argv: list
    cwd: str
    python: Optional[str]
    torch: Optional[str]
    triton: Optional[str]
    thundervis: Optional[str]
    device: Optional[str]
    executors: Optional[list]
    started_at: float
    ended_at: Optional[float]
    status: str
    exit_code: Optional[int]
    traceback: Optional[str]
    pid: Optional[int]
    host: Optional[str] = None
    # What the run recorded last, in words (set when the status is ``killed``).
    last_event: Optional[str] = None

    @property
    def target(self) -> str:
        """Return the script path, or ``-m MODULE``."""
        return self.script if self.script else f"-m {self.module}"


@dataclass(frozen=True)
class PassInfo:
    """One pass of one chain (without its trace; see :meth:`Recording.pass_text`)."""

    graph: int
    chain: str
    index: int
    name: str
    duration_ms: float
    changed: bool
    n_symbols: int


@dataclass(frozen=True)
class Chain:
    """A chain of a graph (dynamo, joint, forward, backward, inference) and its passes."""

    graph: int
    kind: str
    status: str  # compiling | compiled | failed
    error: Optional[str]
    passes: tuple[PassInfo, ...]

    def find_pass(self, which: Union[int, str]) -> PassInfo:
        """Return the pass with index ``which`` (int or digits) or name ``which``; raise
        :class:`UnknownItem` naming the valid choices."""
        for p in self.passes:
            if str(p.index) == str(which) or p.name == str(which):
                return p
        choices = ", ".join(f"{p.index} {p.name}" for p in self.passes) or "none recorded"
        raise UnknownItem(f"graph {self.graph} {self.kind} has no pass {which!r} (passes: {choices})")


@dataclass(frozen=True)
class Failure:
    """A compile or first-call failure; the chain (None: the whole graph) ran eagerly."""

    graph: int
    chain: Optional[str]
    error: str
    traceback: Optional[str]


@dataclass(frozen=True)
class Kernel:
    """A kernel built by a fusion executor (the compiler's kernel record)."""

    id: int
    graph: int
    chain: str
    name: str
    executor: str
    uid: Optional[str]
    pass_name: Optional[str]
    language: Optional[str]
    code: Optional[str]
    members: list
    ops: list
    inputs: list
    outputs: list
    source_lines: list
    note: Optional[str]
    trace_json: Optional[str]


@dataclass(frozen=True)
class Graph:
    """A compiled Dynamo graph: why it was compiled, compile time, chains, failures, kernels."""

    id: int
    compile_id: Optional[str]
    reason: Optional[str]
    recompile_reason: Optional[str]
    graph_break_reason: Optional[str]
    n_inputs: Optional[int]
    n_nodes: Optional[int]
    compile_s: Optional[float]
    chains: tuple[Chain, ...]
    failures: tuple[Failure, ...]
    kernels: tuple[Kernel, ...]

    def chain(self, kind: str) -> Chain:
        """Return the chain ``kind``; raise :class:`UnknownItem` naming the valid choices."""
        for c in self.chains:
            if c.kind == kind:
                return c
        choices = ", ".join(c.kind for c in self.chains) or "none recorded"
        raise UnknownItem(f"graph {self.id} has no {kind!r} chain (chains: {choices})")


@dataclass(frozen=True)
class Symbol:
    """One bound symbol of one pass, as stored for lineage queries."""

    graph: int
    chain: str
    pass_index: int
    position: int
    uid: str
    parent: Optional[str]
    sym: str
    origin: tuple[str, ...]
    source: Optional[SourceInfo]
    seq_nr: Optional[int]
    aten: Optional[str]
    executor: Optional[str]
    note: Optional[str]


@dataclass(frozen=True)
class Event:
    """A runtime event or note (``data`` is decoded JSON)."""

    graph: Optional[int]
    chain: Optional[str]
    event: str
    data: object
    at: float


def _check_header(path: str) -> None:
    """Raise :class:`RecordingError` unless ``path`` starts like a complete SQLite database."""
    if not os.path.exists(path):
        raise RecordingError(f"{path} does not exist.")
    if os.path.isdir(path):
        raise RecordingError(f"{path} is a directory, not a recording.")
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as e:
        raise RecordingError(f"{path} cannot be read ({e.strerror}).") from None
    if len(head) < 100:
        if head and SQLITE_MAGIC.startswith(head[:16]):
            raise RecordingError(f"{path} is truncated ({size} bytes): not a complete recording.")
        raise RecordingError(f"{path} is not a thundervis recording.")
    if not head.startswith(SQLITE_MAGIC):
        raise RecordingError(f"{path} is not a thundervis recording (not an SQLite database).")
    page_size = struct.unpack(">H", head[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    change_counter, n_pages = struct.unpack(">II", head[24:32])
    valid_for = struct.unpack(">I", head[92:96])[0]
    if page_size < 512 or page_size & (page_size - 1):
        raise RecordingError(f"{path} is corrupted (bad page size in the header).")
    if size % page_size or (valid_for == change_counter and n_pages and size < n_pages * page_size):
        raise RecordingError(f"{path} is truncated ({size} bytes, the header says "
                             f"{n_pages * page_size}): the recording is damaged.")


def open_recording(path: str, *, check: bool = True, immutable: bool = False) -> "Recording":
    """Open the recording at ``path`` read-only and return a :class:`Recording`.

    With ``check`` the whole file is verified with SQLite's ``quick_check``. ``immutable``: the
    writer has closed the file and nothing writes it any more (SQLite then takes no locks and leaves
    no ``-wal``/``-shm`` files beside it). Raises :class:`RecordingError` (one sentence) for
    anything that is not a readable recording."""
    path = os.path.abspath(path)
    _check_header(path)
    try:
        conn = sqlite3.connect(f"file:{quote(path)}?mode=ro{'&immutable=1' if immutable else ''}", uri=True,
                               check_same_thread=False)
    except sqlite3.Error as e:
        raise RecordingError(f"{path} cannot be opened ({e}).") from None
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if app_id != APPLICATION_ID:
            raise RecordingError(f"{path} is an SQLite database but not a thundervis recording.")
        if version > SCHEMA_VERSION:
            raise RecordingError(f"{path} was written by a newer thundervis (recording schema {version}; "
                                 f"this version reads up to {SCHEMA_VERSION}): upgrade thundervis to read it.")
        if version < 1:
            raise RecordingError(f"{path} is not a thundervis recording (no schema version).")
        if check:
            result = conn.execute("PRAGMA quick_check").fetchone()[0]
            if result != "ok":
                raise RecordingError(f"{path} is corrupted (SQLite integrity check: {result}).")
        if conn.execute("SELECT COUNT(*) FROM run").fetchone()[0] != 1:
            raise RecordingError(f"{path} is incomplete: it holds no run (it was killed while being created).")
    except RecordingError:
        conn.close()
        raise
    except sqlite3.Error as e:
        conn.close()
        raise RecordingError(f"{path} is corrupted or truncated (SQLite: {e}).") from None
    return Recording(path, conn, version)


class Recording:
    """A recording open for reading; create it with :func:`open_recording`."""

    def __init__(self, path: str, conn: sqlite3.Connection, schema_version: int):
        self.path = path
        self.schema_version = schema_version
        self._conn = conn
        self._shadow_symbols = False  # a temporary table with derived symbol rows exists
        self._rows_complete = False  # the run ended and every pass has its symbol rows

    def close(self) -> None:
        """Close the file."""
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise RecordingError(f"{self.path} is corrupted or truncated (SQLite: {e}).") from None

    def _json(self, text: Optional[str], default=None):
        """Parse a stored JSON value; with a list or dict ``default`` it must be of that type."""
        if text is None:
            return default
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            raise RecordingError(f"{self.path} is corrupted (a stored JSON value does not parse).") from None
        if isinstance(default, (list, dict)) and not isinstance(value, type(default)):
            if value is None:
                return default
            raise RecordingError(f"{self.path} is corrupted (a stored JSON value has the wrong type).")
        return value

    # -- run and graphs -----------------------------------------------------------------------

    def run(self) -> Run:
        """Return the run row."""
        extra = "host, process_start" if self.schema_version >= 2 else "NULL, NULL"
        r = self._rows("SELECT script, module, argv, cwd, python, torch, triton, thundervis, device,"
                       f" executors, started_at, ended_at, status, exit_code, traceback, pid, {extra} FROM run")[0]
        status = run_status(r[12], r[15], r[16], r[17])
        last = last_recorded(self._conn) if status == "killed" else None
        return Run(r[0], r[1], self._json(r[2], []), r[3], r[4], r[5], r[6], r[7], r[8],
                   self._json(r[9]), r[10], r[11], status, r[13], r[14], r[15], r[16], last)

    def graphs(self) -> list[Graph]:
        """Return every graph with its chains, passes, failures and kernels, in graph order."""
        passes: dict[tuple, list[PassInfo]] = {}
        for g, c, i, n, ms, ch, ns in self._rows(
                "SELECT graph_id, chain, idx, name, duration_ms, changed, n_symbols FROM passes"
                " ORDER BY graph_id, chain, idx"):
            passes.setdefault((g, c), []).append(PassInfo(g, c, i, n, ms, bool(ch), ns))
        chains: dict[int, list[Chain]] = {}
        for g, kind, status, error in self._rows("SELECT graph_id, kind, status, error FROM chains"):
            chains.setdefault(g, []).append(Chain(g, kind, status, error, tuple(passes.get((g, kind), ()))))
        failures: dict[int, list[Failure]] = {}
        for g, c, e, tb in self._rows("SELECT graph_id, chain, error, traceback FROM failures ORDER BY id"):
            failures.setdefault(g, []).append(Failure(g, c, e, tb))
        kernels: dict[int, list[Kernel]] = {}
        for k in self.kernels():
            kernels.setdefault(k.graph, []).append(k)
        out = []
        for row in self._rows("SELECT id, compile_id, reason, recompile_reason, graph_break_reason, n_inputs,"
                              " n_nodes, compile_s FROM graphs ORDER BY id"):
            gid = row[0]
            cs = sorted(chains.get(gid, []), key=lambda c: (CHAIN_ORDER.index(c.kind)
                                                            if c.kind in CHAIN_ORDER else 99, c.kind))
            out.append(Graph(*row, chains=tuple(cs), failures=tuple(failures.get(gid, ())),
                             kernels=tuple(kernels.get(gid, ()))))
        return out

    def graph(self, graph_id: int) -> Graph:
        """Return graph ``graph_id``; raise :class:`UnknownItem` naming the recorded graphs."""
        graphs = self.graphs()
        for g in graphs:
            if g.id == graph_id:
                return g
        ids = ", ".join(str(g.id) for g in graphs) or "none recorded"
        raise UnknownItem(f"no graph {graph_id} in this recording (graphs: {ids})")

    def kernels(self, graph: Optional[int] = None) -> list[Kernel]:
        """Return the recorded kernels (of one graph, or all), in the order they were built."""
        where, params = ("WHERE graph_id=?", (graph,)) if graph is not None else ("", ())
        out = []
        for r in self._rows("SELECT id, graph_id, chain, name, executor, uid, pass_name, language, code,"
                            " members, ops, inputs, outputs, source_lines, note, trace_json FROM kernels "
                            f"{where} ORDER BY id", params):
            out.append(Kernel(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8],
                              self._json(r[9], []), self._json(r[10], []), self._json(r[11], []),
                              self._json(r[12], []), self._json(r[13], []), r[14], r[15]))
        return out

    def failures(self) -> list[Failure]:
        """Return every recorded failure, in order."""
        return [Failure(*r) for r in self._rows(
            "SELECT graph_id, chain, error, traceback FROM failures ORDER BY id")]

    def events(self, event: Optional[str] = None) -> list[Event]:
        """Return the recorded events (all, or those named ``event``), in order."""
        where, params = ("WHERE event=?", (event,)) if event else ("", ())
        return [Event(g, c, e, self._json(d), at) for g, c, e, d, at in self._rows(
            f"SELECT graph_id, chain, event, data, at FROM events {where} ORDER BY id", params)]

    # -- passes and symbols -------------------------------------------------------------------

    def _pass_row(self, graph: int, chain: str, index: int) -> tuple:
        """Return (name, symbols_from, trace_json, printed, meta) of one pass, following a shared
        pass to the pass that holds its JSON and text."""
        rows = self._rows("SELECT name, symbols_from, trace_json, printed, meta FROM passes"
                          " WHERE graph_id=? AND chain=? AND idx=?", (graph, chain, index))
        if not rows:
            raise UnknownItem(f"graph {graph} {chain} has no pass {index}")
        name, held, trace_json, printed, meta = rows[0]
        if trace_json is None or printed is None:
            src = self._rows("SELECT trace_json, printed FROM passes WHERE graph_id=? AND chain=? AND idx=?",
                             (graph, chain, held))
            if not src or held == index or src[0][0] is None:
                raise RecordingError(f"{self.path} is corrupted (graph {graph} {chain} pass {index} "
                                     "shares a trace that is missing).")
            trace_json, printed = src[0]
            meta_d = self._json(meta, {})
            header = header_line(Trace(name=chain, inputs=(), symbols=(), outputs=(), chain=chain, graph=graph,
                                       pass_name=name, meta=meta_d))
            printed = header + "\n" + printed.split("\n", 1)[1] if printed.startswith("# graph ") else printed
        return name, held, trace_json, printed, meta

    def pass_text(self, graph: int, chain: str, index: int) -> str:
        """Return the printed trace of one pass."""
        return self._pass_row(graph, chain, index)[3]

    def pass_trace(self, graph: int, chain: str, index: int) -> Trace:
        """Return the trace of one pass, loaded from its JSON by the validating loader."""
        name, held, trace_json, _, meta = self._pass_row(graph, chain, index)
        try:
            trace = trace_from_json(trace_json)
        except (TraceFormatError, ValueError) as e:
            raise RecordingError(f"{self.path} holds a damaged trace for graph {graph} {chain} "
                                 f"pass {index} ({e}).") from None
        if held != index:
            trace = trace.replace(pass_name=name, meta=self._json(meta, {}))
        return trace

    def _shared_passes(self, graph: Optional[int] = None) -> dict[tuple, list[int]]:
        """Map (graph, chain, pass holding rows) -> the other passes that share those rows."""
        where, params = ("AND graph_id=?", (graph,)) if graph is not None else ("", ())
        out: dict[tuple, list[int]] = {}
        for g, c, i, src in self._rows(f"SELECT graph_id, chain, idx, symbols_from FROM passes "
                                       f"WHERE symbols_from != idx {where}", params):
            out.setdefault((g, c, src), []).append(i)
        return out

    def _derive_missing_symbol_rows(self) -> None:
        """Give every pass its ``symbols`` rows. The writer stores them when the run ends; for a
        run that has not ended (still running, or killed), derive them from each pass's stored
        trace into a temporary table that shadows the stored one (the file stays untouched)."""
        # Checked on every query while the run goes on: a viewer may follow a live compile.
        if self._rows_complete:
            return
        missing = self._rows(
            "SELECT graph_id, chain, idx FROM passes p WHERE symbols_from = idx AND n_symbols > 0 AND NOT EXISTS"
            " (SELECT 1 FROM symbols s WHERE s.graph_id = p.graph_id AND s.chain = p.chain AND s.pass_idx = p.idx)"
            " ORDER BY graph_id, chain, idx")
        if not missing:
            self._rows_complete = self._rows("SELECT status FROM run")[0][0] != "running"
            return
        try:
            if not self._shadow_symbols:  # from now on ``symbols`` names this temporary copy
                self._conn.execute("CREATE TEMP TABLE symbols AS SELECT * FROM main.symbols")
                self._shadow_symbols = True
            for g, c, i in missing:
                self._conn.executemany(INSERT_SYMBOL_ROW, symbol_rows(g, c, i, self.pass_trace(g, c, i)))
            self._conn.commit()  # an open transaction would pin the snapshot a live viewer reads
        except sqlite3.Error as e:
            raise RecordingError(f"{self.path} is corrupted or truncated (SQLite: {e}).") from None

    def _symbols(self, where: str, params: tuple, graph: Optional[int] = None,
                 expand: bool = True) -> list[Symbol]:
        """Return the symbols matching ``where`` (with ``expand``, the rows shared by unchanged
        passes repeated for each of them), ordered by graph, chain, pass and position."""
        self._derive_missing_symbol_rows()
        shared = self._shared_passes(graph) if expand else {}
        out = []
        for r in self._rows("SELECT graph_id, chain, pass_idx, position, uid, parent, sym, origin, file, line,"
                            " code, module, function, seq_nr, aten, executor, note FROM symbols "
                            f"WHERE {where} ORDER BY graph_id, chain, pass_idx, position", params):
            src = None
            if r[8] is not None or r[11]:
                src = SourceInfo(file=r[8] or "", line=r[9] or 0, code=r[10] or "", module=r[11] or "",
                                 function=r[12] or "")
            s = Symbol(r[0], r[1], r[2], r[3], r[4], r[5], r[6], tuple(str(o) for o in self._json(r[7], [])),
                       src, r[13], r[14], r[15], r[16])
            out.append(s)
            out.extend(dataclasses.replace(s, pass_index=i) for i in shared.get((s.graph, s.chain, s.pass_index), ()))
        out.sort(key=lambda s: (s.graph, s.chain, s.pass_index, s.position))
        return out

    def symbols(self, graph: int, chain: str, pass_index: int) -> list[Symbol]:
        """Return the symbols of one pass (top level and subsymbols, in walk order)."""
        rows = self._rows("SELECT symbols_from FROM passes WHERE graph_id=? AND chain=? AND idx=?",
                          (graph, chain, pass_index))
        held = rows[0][0] if rows else pass_index
        found = self._symbols("graph_id=? AND chain=? AND pass_idx=?", (graph, chain, held), expand=False)
        if held != pass_index:
            found = [dataclasses.replace(s, pass_index=pass_index) for s in found]
        return found

    def chain_symbols(self, graph: int, chain: str) -> list[Symbol]:
        """Return the symbols of every pass of one chain, by pass then position."""
        return self._symbols("graph_id=? AND chain=?", (graph, chain), graph)

    def symbols_at_line(self, line: int, graph: Optional[int] = None) -> list[Symbol]:
        """Return every symbol (any pass) whose source line is ``line``, optionally in one graph."""
        if graph is None:
            return self._symbols("line=?", (line,))
        return self._symbols("line=? AND graph_id=?", (line, graph), graph)

    def symbols_with_uid(self, graph: int, uid: str) -> list[Symbol]:
        """Return every stored occurrence of ``uid`` in ``graph`` (one per pass it survives)."""
        return self._symbols("graph_id=? AND uid=?", (graph, uid), graph)

    # -- timings and re-runs (thundervis/timings.py, thundervis/rerun.py) ----------------------

    def timings(self):
        """Return the per-kernel and per-chain timings (a :class:`thundervis.timings.Timings`;
        empty when the run was not profiled)."""
        from thundervis.timings import read_timings
        try:
            return read_timings(self._conn)
        except sqlite3.Error as e:
            raise RecordingError(f"{self.path} is corrupted or truncated (SQLite: {e}).") from None

    def rerun_results(self, kernel_id: Optional[int] = None) -> list:
        """Return the stored re-run results (:class:`thundervis.rerun.RerunResult`), oldest first."""
        from thundervis.rerun import read_rerun_results
        try:
            return read_rerun_results(self._conn, kernel_id)
        except sqlite3.Error as e:
            raise RecordingError(f"{self.path} is corrupted or truncated (SQLite: {e}).") from None
