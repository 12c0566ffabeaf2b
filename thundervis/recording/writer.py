"""Writing a recording: :class:`RecordingObserver` turns compiler events into SQLite rows.

Each event is written in its own transaction, so a crash, an exception in the user's script or a
SIGKILL leaves everything committed so far readable (the ``symbols`` rows, an index over each pass's
trace JSON, are written when the run ends; a reader derives them for a run that was killed). The file
is created whole (schema and a ``running`` run row, renamed into place), then kept in WAL mode with
``synchronous=NORMAL``: a committed transaction survives the process being killed (only an OS crash
can lose the last few). The WAL is checkpointed into the main file after the run row, after every
chain and graph and when the run ends, so the ``.tvrec`` copied alone is a recording from its first
byte and holds every finished chain even after ``kill -9``. Events may arrive from any thread (backward graphs compile when the first
backward runs, possibly on an autograd thread), so one lock guards the connection. An observer
must never break the user's training: a failed write is counted, noted once on stderr and in the
``events`` table, and the compile goes on.
"""
from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from typing import Any, Optional, Sequence

from thundervis.compiler import heap_freeze
from thundervis.compiler.ir import KernelRecord, Trace
from thundervis.compiler.observer import CompileObserver
from thundervis.compiler.serialize import kernel_to_dict

from .dynamo_info import DynamoReasons, FrameFailures
from .environment import device_name as _device, versions as _versions
from .liveness import host_name, process_token
from .schema import (INSERT_PASS_SYMBOLS, INSERT_SYMBOL_CONTENT, INSERT_SYMBOL_SOURCE, KERNEL_COLUMN_KEYS, compress_text,
                     create_indexes)
from .trace_text import TraceTextCache
from .writer_rows import (MAX_SOURCE_BYTES, compile_reasons, create_complete, insert_kernels, insert_pass_row,  # noqa: F401
                          source_files, source_rows, stored_pass_texts, symbol_row_lists)

_TraceEncoder = TraceTextCache  # the name tests and older code use


# Traces kept for their symbol rows are written out once they hold this many top-level symbols
# (about 30 MiB of IR); the train_gpt example holds 2k.
MAX_PENDING_SYMBOLS = 50_000


def _json(v: Any) -> str:
    return json.dumps(v, default=str)


class RecordingObserver(CompileObserver):
    """A :class:`CompileObserver` that writes every event into a new recording at ``path``.

    Call :meth:`start_run` once before compiling and :meth:`finish_run` at the end; :meth:`close`
    (or the context manager) closes the file. Raises ``FileExistsError`` if ``path`` exists and
    ``sqlite3.Error``/``OSError`` if it cannot be created.
    """

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        if os.path.exists(self.path):
            raise FileExistsError(f"{self.path} already exists")
        self._lock = threading.RLock()
        create_complete(self.path)
        self._conn: Optional[sqlite3.Connection] = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._reasons = DynamoReasons()
        self._frames = FrameFailures()
        self._encoder = TraceTextCache()
        # (graph, chain) -> (index of the latest pass written, the pass holding its symbol rows)
        self._latest: dict[tuple, tuple[int, int]] = {}
        # Passes whose ``symbols`` rows are still to be written, as (graph, chain, index, trace).
        # Those rows are an index over the pass's trace JSON (stored at once); writing them when
        # the run ends keeps ~2 µs a row off every compile, and a reader derives the rows of a
        # recording whose run never ended (killed) from the JSON.
        self._pending_rows: list[tuple[int, str, int, Trace]] = []
        self._pending_symbols = 0
        self._sources_seen: set[str] = set()
        self._symbol_sources: dict[tuple, int] = {}  # (file, code, module, function) -> symbol_sources id
        self._symbol_ids: dict[tuple, int] = {}  # a symbol row's content -> its symbol_rows id
        # (graph, chain) -> (index, trace JSON, printed text, deltas down to a full snapshot) of
        # the chain's last stored pass: the base of the next pass's deltas.
        self._delta_prev: dict[tuple, tuple] = {}
        self.write_errors = 0

    # -- transactions -------------------------------------------------------------------------

    def _write(self, what: str, fn) -> bool:
        """Run ``fn(conn)`` in one transaction and return whether it committed; on error roll back
        and note it (never raise, except BaseExceptions such as KeyboardInterrupt, which roll back
        and propagate)."""
        with self._lock:
            conn = self._conn
            if conn is None:
                return False
            try:
                conn.execute("BEGIN")
                fn(conn)
                conn.execute("COMMIT")
                return True
            except BaseException as e:
                try:
                    conn.execute("ROLLBACK")
                except Exception:
                    pass
                if not isinstance(e, Exception):
                    raise
                self._note_error(what, e)
                return False

    def _note_error(self, what: str, e: Exception) -> None:
        self.write_errors += 1
        if self.write_errors == 1:
            print(f"thundervis: could not record {what} ({type(e).__name__}: {e}); "
                  "the run goes on", file=sys.stderr)
        try:
            self._conn.execute("INSERT INTO events(event, data, at) VALUES ('write_error', ?, ?)",
                               (_json({"what": what, "error": f"{type(e).__name__}: {e}"}), time.time()))
        except Exception:
            pass

    # -- the run ------------------------------------------------------------------------------

    def start_run(self, *, script: Optional[str], module: Optional[str], argv: Sequence[str],
                  cwd: str, executors: Optional[Sequence[str]] = None) -> None:
        """Record the run row (status ``running``)."""
        v = _versions()

        def fn(c):
            c.execute("INSERT OR REPLACE INTO run(id, script, module, argv, cwd, python, torch, triton, thundervis,"
                      " device, executors, started_at, status, pid, host, process_start)"
                      " VALUES (1,?,?,?,?,?,?,?,?,?,?,?,'running',?,?,?)",
                      (script, module, _json(list(argv)), cwd, v["python"], v["torch"], v["triton"],
                       v["thundervis"], _device(), _json(list(executors)) if executors else None,
                       time.time(), os.getpid(), host_name(), process_token()))
        self._write("the run", fn)
        if script:  # the run's own script, whether or not a compiled graph traces a line of it
            self._sources_seen.add(script)
            rows = source_rows([script])
            self._write("the script's text", lambda c: c.executemany(
                "INSERT OR IGNORE INTO sources(file, text, size, sha256) VALUES (?,?,?,?)", rows))
        self.checkpoint()  # the run row in the main file: a copy of the .tvrec alone names the script

    def finish_run(self, status: str, exit_code: int, traceback_text: Optional[str] = None) -> None:
        """Record the end of the run: ``status`` (ok, failed, interrupted), exit code, traceback.
        Chains still being profiled report their partial timings first."""
        from thundervis.compiler.profiling import flush_all
        flush_all()
        self.record_frame_failures()
        self.write_symbol_rows()
        self._write("the end of the run", lambda c: c.execute(
            "UPDATE run SET status=?, exit_code=?, traceback=?, ended_at=? WHERE id=1",
            (status, exit_code, traceback_text, time.time())))
        self.checkpoint()

    def checkpoint(self) -> None:
        """Copy the WAL into the main file, so the ``.tvrec`` alone (copied, attached to a bug
        report) holds everything committed so far even if the process is killed next. PASSIVE:
        never waits for a viewer that is reading the file live."""
        with self._lock:
            if self._conn is None:
                return
            try:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error as e:
                self._note_error("a checkpoint", e)

    def note(self, event: str, data: Any = None, graph: Optional[int] = None,
             chain: Optional[str] = None) -> None:
        """Record a free-form event (JSON-able ``data``)."""
        self._write(f"event {event}", lambda c: c.execute(
            "INSERT INTO events(graph_id, chain, event, data, at) VALUES (?,?,?,?,?)",
            (graph, chain, event, _json(data), time.time())))

    def record_frame_failures(self) -> None:
        """Record each function Dynamo could not compile since the last call as a
        ``dynamo_frame_failed`` event (:class:`~.dynamo_info.FrameFailures`): it ran eagerly and no
        graph of it reached the backend. Called at each new graph and when the run ends."""
        try:
            failures = self._frames.new_failures()
        except Exception:
            return
        for data in failures:
            self.note("dynamo_frame_failed", data)

    def close(self) -> None:
        """Create the lookup indexes, checkpoint the WAL into the main file and close it; later
        events are ignored."""
        self.record_frame_failures()
        try:
            self.write_symbol_rows()
        except Exception:
            pass
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is None:
                return
            try:
                create_indexes(conn)
            except Exception:
                pass
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except Exception:
                pass
            try:  # a finished recording in rollback-journal mode: readers leave no -wal/-shm files
                conn.execute("PRAGMA journal_mode=DELETE")
            except Exception:  # a reader still has it open: it stays in WAL mode, still complete
                pass
            conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- compiler events ----------------------------------------------------------------------

    def graph_started(self, graph: int, info: dict) -> None:
        """Record a new compiled graph with Dynamo's reasons for compiling it."""
        self.record_frame_failures()
        why, reason = compile_reasons(self._reasons, info)

        def fn(c):
            c.execute("INSERT OR REPLACE INTO graphs(id, compile_id, reason, recompile_reason,"
                      " graph_break_reason, n_inputs, n_nodes, info, started_at) VALUES (?,?,?,?,?,?,?,?,?)",
                      (graph, why["compile_id"], reason, why["recompile_reason"], why["graph_break_reason"],
                       info.get("n_inputs"), info.get("n_nodes"), _json(info), time.time()))
        self._write(f"graph {graph}", fn)

    def pass_done(self, graph: int, chain: str, index: int, name: str, trace: Trace,
                  duration_s: float, changed: bool) -> None:
        """Record one pass: its trace as JSON and text, and all its symbols."""
        try:
            symbols_from, trace_json, printed, delta_base, whole_held = self._pass_row_texts(
                graph, chain, index, name, trace, changed)
            meta = _json({k: v for k, v in trace.meta.items() if isinstance(v, (int, float, str, bool))})
        except Exception as e:
            with self._lock:
                self._delta_prev.pop((graph, chain), None)
                if self._conn is not None:
                    self._note_error(f"graph {graph} {chain} pass {index} {name}", e)
            return
        costs = self._final_costs(graph, chain, name, trace)
        row = dict(graph_id=graph, chain=chain, idx=index, name=name, duration_ms=duration_s * 1e3,
                   changed=int(bool(changed)), n_symbols=len(trace.symbols), symbols_from=symbols_from,
                   trace_json=trace_json, printed=printed, meta=meta, delta_base=delta_base)
        if index == 0:
            self.record_sources(trace)
        written = self._write(f"graph {graph} {chain} pass {index} {name}",
                              lambda c: insert_pass_row(c, row, whole_held, costs))
        self._pass_written(graph, chain, index, name, trace, symbols_from, written)

    def _pass_row_texts(self, graph: int, chain: str, index: int, name: str, trace: Trace,
                        changed: bool) -> tuple:
        """Return a pass row's (symbols_from, trace JSON, printed text, delta base, whole_held): the
        pass it shares symbols and texts with, its own stored texts (None when shared) and the
        whole texts to put back into a held delta pass, or None."""
        with self._lock:
            # A pass that changed nothing has the same symbols, inputs and outputs as the pass
            # just before it: it shares that pass's rows, JSON and text (the reader restores
            # its name, header and meta).
            prev = self._latest.get((graph, chain))
            symbols_from = prev[1] if (not changed and prev is not None and prev[0] == index - 1) else index
            own = symbols_from == index
            trace_json = printed = delta_base = None
            last = name == "codegen" or chain in ("dynamo", "joint")  # the chain's last pass
            if own:
                trace_json, printed, delta_base = self._pass_texts(graph, chain, index, trace, whole=last)
            # The final pass of a chain is what views open first and ls and source read: it is
            # stored whole, also when it shares the texts of a pass stored as a delta.
            held = self._delta_prev.get((graph, chain)) if last and not own else None
            whole_held = ((held[0], compress_text(held[1]), compress_text(held[2]))
                          if held is not None and held[0] == symbols_from and held[3] > 0 else None)
            if last:
                self._encoder.forget(graph, chain)
                self._delta_prev.pop((graph, chain), None)
        return symbols_from, trace_json, printed, delta_base, whole_held

    def _pass_written(self, graph: int, chain: str, index: int, name: str, trace: Trace,
                      symbols_from: int, written: bool) -> None:
        """After a pass row's write: keep the chain's latest pass and its pending symbol rows."""
        if not written:
            with self._lock:  # the next pass of the chain must not be a delta against this one
                self._delta_prev.pop((graph, chain), None)
            return
        if name == "codegen" or chain in ("dynamo", "joint"):
            self.checkpoint()  # each finished chain in the main file: a copy of it alone holds it
        with self._lock:
            self._latest[(graph, chain)] = (index, symbols_from)
            if symbols_from == index:  # the pass has its own symbol rows
                self._pending_rows.append((graph, chain, index, trace))
                self._pending_symbols += len(trace.symbols)
            flush = self._pending_symbols > MAX_PENDING_SYMBOLS
        if flush:  # a long run with many graphs: bound the memory the kept traces take
            self.write_symbol_rows()

    def _pass_texts(self, graph: int, chain: str, index: int, trace: Trace, whole: bool = False) -> tuple:
        """Return a pass's stored (trace JSON, printed text, delta base): compressed deltas against
        the chain's previous stored pass when they are clearly smaller and the chain of deltas stays
        within MAX_DELTA_CHAIN, else (or with ``whole``) the compressed full texts (delta base None).
        Call under the lock."""
        prev = self._delta_prev.get((graph, chain))
        stored, j_text, p_text, depth = stored_pass_texts(self._encoder, trace, index, None if whole else prev)
        self._delta_prev[(graph, chain)] = (index, j_text, p_text, depth)
        return stored

    def _final_costs(self, graph: int, chain: str, name: str, trace: Trace):
        """Return the roofline costs of a forward/backward/inference chain's final (``codegen``)
        trace, else None; a failing cost model is noted, and the pass is recorded anyway."""
        if name != "codegen" or chain not in ("forward", "backward", "inference"):
            return None
        try:
            from thundervis.compiler.roofline_cost import trace_costs
            return trace_costs(trace)
        except Exception as e:
            with self._lock:
                if self._conn is not None:
                    self._note_error(f"the roofline costs of graph {graph} {chain}", e)
            return None

    def record_sources(self, trace: Trace) -> None:
        """Store the text of every user source file ``trace``'s symbols point at that is not
        stored yet (the file as it is now, which is what this compile read)."""
        files = source_files(trace, self._sources_seen)
        if not files:
            return
        rows = source_rows(files)
        self._write("the source files", lambda c: c.executemany(
            "INSERT OR IGNORE INTO sources(file, text, size, sha256) VALUES (?,?,?,?)", rows))

    def write_symbol_rows(self) -> None:
        """Write the ``symbols`` rows of every pass recorded so far (done when the run ends)."""
        with self._lock:
            pending, self._pending_rows, self._pending_symbols = self._pending_rows, [], 0
        if not pending:
            return
        ids, content_ids = self._symbol_sources, self._symbol_ids
        # Collections paced as in a compile: the rows are allocated in bulk and all live until they
        # are written, so each full collection CPython would start walks the whole heap for nothing
        # (at 24 layers 0.56 of the batches' 0.87 CPU-s; 0.08 of 0.37 paced).
        with heap_freeze.compiling():
            new, new_rows, lists = symbol_row_lists(pending, ids, content_ids)

        def fn(c):
            c.executemany(INSERT_SYMBOL_SOURCE, new)
            c.executemany(INSERT_SYMBOL_CONTENT, new_rows)
            c.executemany(INSERT_PASS_SYMBOLS, lists)
        if not self._write("the symbol rows", fn):
            for row in new:  # rolled back: those ids were not stored
                ids.pop(row[1:], None)
            for row in new_rows:
                content_ids.pop(row[1:], None)

    def kernels_built(self, graph: int, chain: str, kernels: list) -> None:
        """Record the kernels a fusion executor built (``KernelRecord``s, or their JSON dicts)."""
        kernels = [kernel_to_dict(k) if isinstance(k, KernelRecord) else k for k in kernels]

        def fn(c):
            insert_kernels(c, graph, chain, kernels, _json, KERNEL_COLUMN_KEYS)  # folds repeated layers' kernels
        self._write(f"kernels of graph {graph} {chain}", fn)

    def memory_ledger(self, graph: int, ledger: dict) -> None:
        """Record ``graph``'s memory ledger (the ``memory_*`` tables)."""
        from .writer_memory import write_ledger
        self._write(f"memory ledger of graph {graph}", lambda c: write_ledger(c, graph, ledger))

    def kernel_compiled(self, graph: int, chain: str, kernel: str, target: str, build: dict) -> None:
        """Record a kernel compiled ahead of time for ``target`` (or its failure); see recording/builds.py."""
        from .builds import store_build
        self._write(f"the {target} build of {kernel}",
                    lambda c: store_build(c, graph, chain, kernel, target, build))

    def chain_failed(self, graph: int, chain: Optional[str], error: str, tb: str) -> None:
        """Record a compile (or first-call) failure; the chain or graph ran eagerly."""
        if chain is not None:
            with self._lock:
                self._encoder.forget(graph, chain)
                self._delta_prev.pop((graph, chain), None)
        def fn(c):
            c.execute("INSERT INTO failures(graph_id, chain, error, traceback, at) VALUES (?,?,?,?,?)",
                      (graph, chain, error, tb, time.time()))
            if chain is not None:
                c.execute("INSERT OR IGNORE INTO chains(graph_id, kind, status) VALUES (?,?,'failed')",
                          (graph, chain))
                c.execute("UPDATE chains SET status='failed', error=? WHERE graph_id=? AND kind=?",
                          (error, graph, chain))
        self._write(f"a failure of graph {graph}", fn)

    def graph_finished(self, graph: int, compile_s: float) -> None:
        """Record the graph's compile time."""
        self._write(f"graph {graph} compile time", lambda c: c.execute(
            "UPDATE graphs SET compile_s=? WHERE id=?", (compile_s, graph)))
        self.checkpoint()

    def runtime(self, graph: int, chain: str, event: str, data: Any) -> None:
        """Record a runtime event. Profiler timings go to the timing tables and captured fusion
        inputs to safetensors files next to the recording (recording/results.py, capture.py)."""
        if event == "timings":
            from .results import store_timings
            self._write(f"timings of graph {graph} {chain}", lambda c: store_timings(c, graph, chain, data))
            return
        if event == "walls" and isinstance(data, dict):  # the untimed calls after the timed ones
            from .results import store_walls
            self._write(f"wall times of graph {graph} {chain}", lambda c: store_walls(c, graph, chain, data))
            return
        if event == "memory" and isinstance(data, dict):  # what a chain call really kept live
            from .writer_memory import write_measured
            self._write(f"measured memory of graph {graph} {chain}", lambda c: write_measured(c, graph, chain, data))
            return
        if event == "numerics" and isinstance(data, list):  # a chain call's checks: one transaction
            from .numerics import store_kernel_numerics_rows
            self._write(f"numerics of graph {graph} {chain}", lambda c: store_kernel_numerics_rows(c, graph, chain, data))
            return
        if event in ("numerics", "eager_compare") and isinstance(data, dict):
            from .numerics import store_eager_comparison, store_kernel_numerics
            store = store_kernel_numerics if event == "numerics" else store_eager_comparison
            self._write(f"{event} of graph {graph} {chain}", lambda c: store(c, graph, chain, data))
            return
        if event in ("inputs", "chain_inputs"):  # a fusion's inputs, or a whole chain's (bisect)
            from .capture import save_captured_inputs
            try:
                data = save_captured_inputs(self.path, graph, chain, data)
            except Exception as e:  # capture is best effort
                data = {"kernel": data.get("kernel"), "skipped": f"{type(e).__name__}: {e}"}
            self.note("captured_inputs" if event == "inputs" else "captured_chain_inputs", data,
                      graph=graph, chain=chain)
            return
        self.note(event, data, graph=graph, chain=chain)
