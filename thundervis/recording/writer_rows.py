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
from .pass_deltas import encode_ids
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
