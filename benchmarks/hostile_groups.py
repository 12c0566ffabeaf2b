"""Hostile groups (issue 41, item 6): ``numerics GROUP`` over many ranks and ``ls`` over a recording
holding millions of event rows, timed through the real CLI in a subprocess.

Builds one synthetic rank recording (``_synthetic_recording``, with its ``distributed`` event and
every kernel checked as ``run --check-numerics`` records it) and
copies it to ``--ranks`` rank files of a group folder (what differs between ranks does not change
how much a group command reads), and a copy of it with ``--events`` extra ``events`` rows (about
70 bytes of JSON each, as in the report: 3 M rows, 218 MB). Prints each command's wall and CPU time
against its target (numerics over 2,000 ranks <= 3 s; ls on 3 M events <= 2 s). Timings vary with the
machine: this prints them, it asserts nothing.

    python benchmarks/hostile_groups.py [--ranks 500 1000 2000] [--events 3000000]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

NUMERICS_TARGET_S, LS_TARGET_S = 3.0, 2.0


def _cli(*argv: str) -> tuple[str, int, str]:
    """Run the CLI; return ("wall s (CPU s)", exit code, its last stderr line). CPU time (user +
    system of the child) is printed beside wall time: on a shared machine wall time measures the load."""
    t = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([sys.executable, "-m", "thundervis", *argv], capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return f"{wall:6.2f} s ({cpu:5.2f} s CPU)", p.returncode, (p.stderr.strip().splitlines() or [""])[-1][:120]


def base_recording(folder: str) -> str:
    """Write the rank recording every rank file copies; return its path."""
    from _synthetic_recording import write_recording
    path = os.path.join(folder, "base.tvrec")

    def also(obs):
        obs.note("distributed", {"rank": 0, "local_rank": 0, "world_size": 1, "local_world_size": 1,
                                 "node_rank": 0, "restart": 0})
    write_recording(path, n_symbols=40, also=also)
    conn = sqlite3.connect(path)  # every kernel checked, as run --check-numerics records them
    with conn:
        conn.executemany(
            "INSERT INTO kernel_numerics(graph_id, chain, kernel, uid, executor, calls, max_abs_error,"
            " max_rel_error, eager_abs_error, eager_rel_error, ratio, tolerance, verdict, detail)"
            " SELECT graph_id, chain, name, uid, executor, 3, 1e-6, 1e-5, 1e-6, 1e-5, 1.0, 10.0, ?, NULL"
            " FROM kernels WHERE id = ?",
            [("flagged" if kid == 1 else "ok", kid) for (kid,) in conn.execute("SELECT id FROM kernels")])
    conn.close()
    return path


def group_of(base: str, folder: str, n: int) -> str:
    """Return a group folder of ``n`` copies of ``base`` (rank-00000.tvrec ...)."""
    group = os.path.join(folder, f"group{n}")
    os.makedirs(group, exist_ok=True)
    for r in range(n):
        shutil.copy(base, os.path.join(group, f"rank-{r:05d}.tvrec"))
    return group


def with_events(base: str, folder: str, n: int) -> str:
    """Return a copy of ``base`` holding ``n`` more event rows."""
    path = os.path.join(folder, f"events{n}.tvrec")
    shutil.copy(base, path)
    conn = sqlite3.connect(path)
    data = '{"kernel": "fw_fusion_0", "path": "cpu via torch", "pad": "' + "x" * 24 + '"}'
    step = 100_000
    for k in range(0, n, step):
        conn.executemany("INSERT INTO events(graph_id, chain, event, data, at) VALUES (0, 'forward', ?, ?, ?)",
                         (("kernel_path" if i % 2 else "note", data, float(i)) for i in range(k, min(n, k + step))))
    conn.commit()
    conn.close()
    return path


def main() -> None:
    """Build the cases and print each command's time against its target."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="*", default=[500, 1000, 2000])
    ap.add_argument("--events", type=int, default=3_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        base = base_recording(folder)
        for n in args.ranks:
            group = group_of(base, folder, n)
            s, rc, last = _cli("numerics", group)
            print(f"numerics GROUP of {n:>6} ranks: {s} (exit {rc}; target <= {NUMERICS_TARGET_S:g} s at 2,000)"
                  f"  {last}", flush=True)
            # an unpacked group: ls decodes each rank's final trace of every chain, not every pass's
            s, rc, last = _cli("ls", group)
            print(f"ls GROUP       of {n:>6} ranks: {s} (exit {rc}; unpacked ranks)", flush=True)
            shutil.rmtree(group)
        if args.events:
            path = with_events(base, folder, args.events)
            mb = os.path.getsize(path) / 1e6
            s, rc, last = _cli("ls", path)
            print(f"ls on {args.events:,} events ({mb:.0f} MB): {s} (exit {rc}; target <= {LS_TARGET_S:g} s)"
                  f"  {last}", flush=True)


if __name__ == "__main__":
    main()
