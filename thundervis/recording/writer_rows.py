"""The parts of writing a recording that are plain functions of their inputs: creating the file
whole, reading the user's source files into ``sources`` rows, and turning the kept traces into
deduplicated ``symbols`` rows. :class:`~.writer.RecordingObserver` calls them under its lock."""
from __future__ import annotations

import hashlib
import linecache
import os
import sqlite3
import time

from .environment import versions as _versions
from .liveness import host_name, process_token
from .pass_deltas import JSON_SEPARATOR, MAX_DELTA_CHAIN, TEXT_SEPARATOR, encode_delta, encode_ids
from .schema import compress_text, create_schema
from .trace_text import TraceTextCache

# The user's source files are stored up to this size each (bigger ones: path only).
MAX_SOURCE_BYTES = 2 * 2**20


def create_complete(path: str) -> None:
    """Create the recording at ``path`` whole or not at all: schema and a ``running`` run row (this
    process's pid, host and start token, so a kill at any later point reads as ``killed``) are
    written to a hidden file beside it in rollback-journal mode, which is then renamed into place.
    From its first byte the ``.tvrec`` alone is a valid recording; no WAL holds its start."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.creating")
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            create_schema(conn, _versions()["thundervis"] or "unknown")
            conn.execute("INSERT INTO run(id, argv, cwd, started_at, status, pid, host, process_start)"
                         " VALUES (1, '[]', ?, ?, 'running', ?, ?, ?)",
                         (os.getcwd(), time.time(), os.getpid(), host_name(), process_token()))
        finally:
            conn.close()
        if os.path.exists(path):
            raise FileExistsError(f"{path} already exists")
        os.rename(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def source_files(trace, seen: set) -> list:
    """Return the user source files ``trace``'s symbols (and subsymbols) point at that are not in
    ``seen`` yet, adding them to ``seen``."""
    files = []
    stack = list(trace.symbols)
    while stack:
        b = stack.pop()
        f = b.source.file if b.source is not None else None
        if f and f not in seen:
            seen.add(f)
            files.append(f)
        stack.extend(b.subsymbols)
    return files


def source_rows(files: list) -> list:
    """Return ``sources`` rows (file, compressed text, size, sha256) for ``files``: the file as it
    is now (what this compile read), or a notebook cell from linecache; text None when missing or
    over MAX_SOURCE_BYTES."""
    rows = []
    for f in files:
        text, size, digest = None, None, None
        try:
            if os.path.isfile(f):
                size = os.path.getsize(f)
                if size <= MAX_SOURCE_BYTES:
                    with open(f, "rb") as fh:
                        data = fh.read(MAX_SOURCE_BYTES + 1)
                    digest = hashlib.sha256(data).hexdigest()
                    text = data.decode("utf-8", errors="replace")
            elif f in linecache.cache:  # a notebook cell (``cell [N]``, compiler.source.cell_file)
                data = "".join(linecache.getlines(f)).encode("utf-8")[:MAX_SOURCE_BYTES]
                size, digest = len(data), hashlib.sha256(data).hexdigest()
                text = data.decode("utf-8", errors="replace")
        except OSError:
            pass
        rows.append((f, compress_text(text), size, digest))
    return rows


def symbol_row_lists(pending: list, ids: dict, content_ids: dict) -> tuple:
    """Turn kept passes ``pending`` ((graph, chain, index, trace) each) into rows to insert.

    ``ids`` maps (file, code, module, function) to a ``symbol_sources`` id and ``content_ids`` a
    symbol row's content to its ``symbol_rows`` id; both are extended in place. Returns (new source
    rows, new content rows, per-pass compressed id lists)."""
    rows_of = TraceTextCache()  # shares the rows of symbols a pass kept across a chain's passes
    new: list[tuple] = []
    new_rows: list[tuple] = []
    lists = []
    for graph, chain, index, trace in pending:
        row_ids = []
        for r in rows_of.symbol_rows(graph, chain, index, trace):
            key = (r[8], r[10], r[11], r[12])
            sid = None
            if key != (None, None, None, None):
                sid = ids.get(key)
                if sid is None:
                    sid = ids[key] = len(ids) + 1
                    new.append((sid,) + key)
            content = (r[4], r[5], r[6], r[7], r[9], r[13], r[14], r[15], r[16], sid)
            rid = content_ids.get(content)
            if rid is None:
                rid = content_ids[content] = len(content_ids) + 1
                new_rows.append((rid,) + content)
            row_ids.append(rid)
        lists.append((graph, chain, index, compress_text(encode_ids(row_ids))))
    return new, new_rows, lists


def compile_reasons(reasons, info: dict) -> tuple[dict, str]:
    """Return (Dynamo's reasons ``{compile_id, recompile_reason, graph_break_reason}`` for the
    graph being compiled, read from ``reasons`` (a :class:`~.dynamo_info.DynamoReasons`), the graph's
    one-line reason) for a graph whose compiler ``info`` is given."""
    try:
        why = reasons.current()
    except Exception:
        why = {"compile_id": None, "recompile_reason": None, "graph_break_reason": None}
    if isinstance(info.get("specialization"), str):
        # One shape of a dynamic-shape graph, compiled at its first call: not during a Dynamo
        # compile, so Dynamo's compile id and recompile reason (of an earlier compile) are not its.
        why = {**why, "compile_id": None, "recompile_reason": None}
    reason = (info["specialization"] if isinstance(info.get("specialization"), str)
              else ("recompile: " + why["recompile_reason"].splitlines()[0]) if why["recompile_reason"]
              else ("graph break: " + why["graph_break_reason"].splitlines()[0]) if why["graph_break_reason"]
              else info.get("reason"))
    return why, reason


def stored_pass_texts(encoder, trace, index: int, prev) -> tuple:
    """Return ((trace JSON, printed text, delta base) as stored, JSON text, printed text, delta
    depth) of a pass: compressed deltas against ``prev`` (the chain's previous stored pass: index,
    JSON, text, depth; None: store whole) when they are clearly smaller and the chain of deltas
    stays within MAX_DELTA_CHAIN, else the compressed full texts (delta base None)."""
    j_text, p_text = encoder.to_json(trace), encoder.print(trace)
    full_j, full_p = compress_text(j_text), compress_text(p_text)
    stored, depth = (full_j, full_p, None), 0
    if prev is not None and prev[0] < index and prev[3] < MAX_DELTA_CHAIN:
        delta_j = compress_text(encode_delta(prev[1], j_text, JSON_SEPARATOR))
        delta_p = compress_text(encode_delta(prev[2], p_text, TEXT_SEPARATOR))
        if len(delta_j) + len(delta_p) < 0.8 * (len(full_j) + len(full_p)):
            stored, depth = (delta_j, delta_p, prev[0]), prev[3] + 1
    return stored, j_text, p_text, depth


PASS_COLUMNS = ("graph_id", "chain", "idx", "name", "duration_ms", "changed", "n_symbols", "symbols_from",
                "trace_json", "printed", "meta", "recorded_at", "delta_base")


def insert_pass_row(c: sqlite3.Connection, row: dict, whole_held, costs) -> None:
    """Write one ``passes`` row on ``c`` (``row``: its columns but ``recorded_at``, which is now):
    its chain's row first, a final pass's roofline ``costs`` (or None), the whole texts
    ``whole_held`` = (idx, JSON, text) put back into a pass stored as a delta (or None), and for a
    chain's last pass the chain's status ``compiled``."""
    graph, chain = row["graph_id"], row["chain"]
    c.execute("INSERT OR IGNORE INTO chains(graph_id, kind, status) VALUES (?,?,'compiling')", (graph, chain))
    if costs is not None:
        from .costs import store_costs
        store_costs(c, graph, chain, costs)
    if whole_held is not None:
        c.execute("UPDATE passes SET trace_json=?, printed=?, delta_base=NULL WHERE graph_id=? AND chain=?"
                  " AND idx=?", (whole_held[1], whole_held[2], graph, chain, whole_held[0]))
    values = dict(row, recorded_at=time.time())
    c.execute(f"INSERT OR REPLACE INTO passes({', '.join(PASS_COLUMNS)}) VALUES ({','.join('?' * len(PASS_COLUMNS))})",
              tuple(values[k] for k in PASS_COLUMNS))
    if row["name"] == "codegen" or chain in ("dynamo", "joint"):
        c.execute("UPDATE chains SET status='compiled' WHERE graph_id=? AND kind=? AND status!='failed'",
                  (graph, chain))


_INSERT_KERNEL = ("INSERT OR REPLACE INTO kernels(graph_id, chain, name, executor, uid, pass_name, language, code,"
                  " members, ops, inputs, outputs, source_lines, note, trace_json, record)"
                  " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")


def insert_kernels(c: sqlite3.Connection, graph: int, chain: str, kernels: list, as_json, column_keys) -> None:
    """Insert the kernel records ``kernels`` (JSON dicts) of one chain. A kernel whose ``fold_key``
    (the executor's structural key) an earlier kernel of the batch had is folded: its row holds no
    code nor region IR, and a ``kernel_folds`` row points it at that first instance. ``as_json``
    writes a JSON column; ``column_keys`` are the record keys that have a column of their own."""
    names = [str(k.get("name")) for k in kernels]
    for i in range(0, len(names), 500):  # rows replaced below drop their old fold references
        part = names[i:i + 500]
        c.execute("DELETE FROM kernel_folds WHERE kernel_id IN (SELECT id FROM kernels WHERE graph_id=? AND chain=?"
                  f" AND name IN ({','.join('?' * len(part))}))", (graph, chain, *part))
    first: dict = {}
    for k in kernels:
        key = k.get("fold_key")
        key = (str(k.get("executor")), key) if isinstance(key, str) and key else None
        fold_of = first.get(key) if key is not None else None
        code = None if fold_of is not None else compress_text(k.get("code"))
        trace = None if fold_of is not None or k.get("trace") is None else compress_text(as_json(k["trace"]))
        cur = c.execute(_INSERT_KERNEL, (
            graph, chain, str(k.get("name")), str(k.get("executor")), k.get("uid"), k.get("pass"), k.get("language"),
            code, as_json(k.get("members") or []), as_json(k.get("ops") or []), as_json(k.get("inputs") or []),
            as_json(k.get("outputs") or []), as_json(k.get("source_lines") or []), k.get("note"), trace,
            as_json({key_: v for key_, v in k.items() if key_ not in column_keys})))
        if fold_of is not None:
            c.execute("INSERT OR REPLACE INTO kernel_folds(kernel_id, fold_of) VALUES (?, ?)", (cur.lastrowid, fold_of))
        elif key is not None:
            first[key] = cur.lastrowid
