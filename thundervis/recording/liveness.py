"""Is the run that wrote a recording still alive? One function decides a recording's status.

A run row says ``running`` from its start until ``finish_run``; a run killed with SIGKILL (or
``os._exit``) never gets to say otherwise. The writer records the process id, the host name and a
process start token (Linux: boot id and the process's start time in clock ticks, from ``/proc``),
and :func:`run_status` reports ``killed`` when the row says ``running`` but that process is gone:
same host, and the pid is not alive or now belongs to a process that started at another time. On
another host, or for a recording written before these fields existed (schema 1), it cannot tell
and keeps ``running``.
"""
from __future__ import annotations

import os
import socket
import sqlite3
import time
from typing import Optional


def host_name() -> str:
    """Return this machine's host name."""
    try:
        return socket.gethostname()
    except OSError:
        return ""


def process_token(pid: Optional[int] = None) -> Optional[str]:
    """Return a token naming process ``pid`` (default: this one) for its whole life, or None when
    the platform has no way to tell (no ``/proc``) or the process does not exist."""
    pid = os.getpid() if pid is None else pid
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        # Field 22 (starttime) counts from boot; fields after the ")" ending the command name.
        start = stat.rsplit(")", 1)[1].split()[19]
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except (OSError, IndexError, ValueError):
        return None
    return f"{boot}:{start}"


def pid_alive(pid: int) -> bool:
    """Return True when a process with id ``pid`` exists on this machine."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return False
    return True


def run_status(status: str, pid: Optional[int], host: Optional[str], token: Optional[str]) -> str:
    """Return the status to show for a run row: ``killed`` when it says ``running`` but its process
    (``pid`` on ``host``, started as ``token``) is gone; otherwise ``status`` unchanged."""
    if status != "running" or not pid or not host or host != host_name():
        return status
    if not pid_alive(int(pid)):
        return "killed"
    if token:
        now = process_token(int(pid))
        if now is not None and now != token:
            return "killed"  # the pid was reused by another process
    return status


def last_recorded(conn: sqlite3.Connection) -> Optional[str]:
    """Return the last thing the run recorded, in words with its time (``graph 0 backward pass
    fuse at 12:03:04``), or None for an empty recording."""
    candidates = []
    queries = [
        ("SELECT recorded_at, graph_id, chain, name FROM passes ORDER BY recorded_at DESC LIMIT 1",
         lambda r: f"graph {r[1]} {r[2]} pass {r[3]}"),
        ("SELECT at, graph_id, chain, event FROM events ORDER BY at DESC LIMIT 1",
         lambda r: f"event {r[3]}" + (f" (graph {r[1]} {r[2] or ''})".replace(" )", ")") if r[1] is not None else "")),
        ("SELECT at, graph_id, chain FROM failures ORDER BY at DESC LIMIT 1",
         lambda r: f"a failure of graph {r[1]}" + (f" {r[2]}" if r[2] else "")),
        ("SELECT started_at, id FROM graphs ORDER BY started_at DESC LIMIT 1",
         lambda r: f"graph {r[1]} started"),
    ]
    for sql, words in queries:
        try:
            row = conn.execute(sql).fetchone()
        except sqlite3.Error:
            continue
        if row is not None and isinstance(row[0], (int, float)):
            candidates.append((row[0], words(row)))
    if not candidates:
        return None
    at, what = max(candidates, key=lambda c: c[0])
    try:
        return f"{what} at {time.strftime('%H:%M:%S', time.localtime(at))}"
    except (OverflowError, ValueError, OSError):  # a time no clock can show: a damaged file
        return what
