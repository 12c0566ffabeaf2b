"""Rank scale: a group of 1024 ranks stored with its traces once per group vs one rank alone.

Records the GPT example model's training step a few times, each a distinct *variant* (default
executors; torch only; a shorter sequence), packs them as ranks of a group (the real
``pack_group``), then makes ranks up to ``--ranks`` from the packed rank file of their variant with
what differs between real ranks changed (run row: pid, times; each pass's duration; the rank's
``distributed`` event; the ``collective`` events an FSDP2 rank records, with its own times), and packs again: each becomes a ``.tvrank`` standing on its variant. Prints the group's size on disk against one rank's unpacked recording
(target < 2x) and the time ``thundervis ls GROUP`` takes (target < 2 s), both measured here.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SIZE_TARGET, LS_TARGET = 2.0, 2.0


def record_variant(path: str, executors, shorten: int) -> None:
    """Record one training step of the GPT example (``shorten``: drop that many tokens)."""
    import torch
    import torch._dynamo
    from _gpt_model import build, train_step
    from thundervis.compiler import ThundervisCompiler
    from thundervis.compiler.backend import reset_graph_ids
    from thundervis.recording import RecordingObserver
    torch._dynamo.reset()
    reset_graph_ids()
    rec = RecordingObserver(path)
    rec.start_run(script=__file__, module=None, argv=sys.argv, cwd=os.getcwd())
    model, batches, _ = build()
    x, y = batches[0]
    if shorten:
        x, y = x[:, :-shorten].contiguous(), y[:, :-shorten].contiguous()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    run = torch.compile(model, backend=ThundervisCompiler(executors=executors, observer=rec), dynamic=False)
    train_step(run, model, opt, (x, y))
    rec.finish_run("ok", 0)
    rec.close()


def _as_rank(path: str, rank: int, world: int, rng: random.Random) -> None:
    """Change what differs between ranks in a copied rank file: run row, durations, rank event,
    collectives."""
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("BEGIN")
    t0 = 1.7e9 + rng.random()
    c.execute("UPDATE run SET pid=?, started_at=?, ended_at=?", (10000 + rank, t0, t0 + 30 + rng.random()))
    for g, ch, i, meta in c.execute("SELECT graph_id, chain, idx, meta FROM passes").fetchall():
        d = json.loads(meta)
        d["duration_ms"] = float(d.get("duration_ms", 1.0)) * (0.8 + 0.4 * rng.random())
        c.execute("UPDATE passes SET meta=?, duration_ms=? WHERE graph_id=? AND chain=? AND idx=?",
                  (json.dumps(d), d["duration_ms"], g, ch, i))
    c.execute("DELETE FROM events WHERE event='distributed'")
    c.execute("INSERT INTO events(event, data, at) VALUES ('distributed', ?, ?)",
              (json.dumps({"rank": rank, "local_rank": rank % 8, "world_size": world, "node_rank": rank // 8}), t0))
    c.execute("DELETE FROM events WHERE event IN ('collective', 'collective_summary')")
    for seq, data in enumerate(_fsdp_collectives(world, rng)):
        c.execute("INSERT INTO events(event, data, at) VALUES ('collective', ?, ?)", (json.dumps(data), t0 + seq))
    summary = {"between_graphs": 3 * FSDP_UNITS * 50, "recorded": 3 * FSDP_UNITS * 2, "steps": 50, "full_steps": 2,
               "full_limit": 512, "by_op": [{"op": "all_gather", "group_size": world, "count": 2 * FSDP_UNITS * 50,
                                             "bytes": 50 * 2 * FSDP_UNITS * 16384 * (world + 1)},
                                            {"op": "reduce_scatter", "group_size": world, "count": FSDP_UNITS * 50,
                                             "bytes": 50 * FSDP_UNITS * 16384 * (world + 1)}],
               "places": [{"after": {"graph": u, "chain": "forward"}, "before": {"graph": u + 1, "chain": "forward"},
                           "op": "all_gather", "count": 100, "bytes": 100 * 16384 * (world + 1)}
                          for u in range(FSDP_UNITS)]}
    c.execute("INSERT INTO events(event, data, at) VALUES ('collective_summary', ?, ?)", (json.dumps(summary), t0 + 99))
    c.execute("COMMIT")
    c.close()


FSDP_UNITS = 12  # sharded modules of an FSDP2 job: an all-gather each way and a reduce-scatter per step


def _fsdp_collectives(world: int, rng: random.Random) -> list:
    """Return the ``collective`` events an FSDP2 rank records over its first two steps (the
    watcher's layout; what ranks share except the times, which are each rank's own)."""
    out, seq = [], 0
    for step in range(2):
        for op, c10d, n in (("all_gather", "_allgather_base_", FSDP_UNITS), ("all_gather", "_allgather_base_", FSDP_UNITS),
                            ("reduce_scatter", "_reduce_scatter_base_", FSDP_UNITS)):
            for unit in range(n):
                numel = 4096 * (1 + unit % 3)
                out.append({"seq": seq, "op": op, "c10d_op": c10d, "group_size": world, "group": "0",
                            "backend": "nccl", "inputs": [[[numel], "bfloat16"]],
                            "outputs": [[[numel * world], "bfloat16"]], "bytes": 2 * numel * (world + 1),
                            "async": True, "step": step, "after": {"graph": unit, "chain": "forward", "call": step + 1},
                            "before": {"graph": unit + 1, "chain": "forward", "call": step + 1},
                            "issuer": "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py:119 __call__",
                            "source": "train.py:87", "issue_ms": round(0.05 + 0.1 * rng.random(), 3),
                            "duration_ms": round(1 + 3 * rng.random(), 3)})
                seq += 1
    return out


def _disk(folder: str) -> tuple[int, int]:
    """Return (bytes of the files, bytes of the blocks they occupy) under ``folder``."""
    size = blocks = 0
    for name in os.listdir(folder):
        st = os.stat(os.path.join(folder, name))
        size += st.st_size
        blocks += st.st_blocks * 512
    return size, blocks


def main() -> int:
    """Build the group, measure, print; return 0 when both targets are met."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=3, help="ls runs (median)")
    p.add_argument("--keep", default=None, help="build the group in this folder and keep it")
    p.add_argument("--reuse", action="store_true", help="with --keep: reuse the variant recordings already there")
    args = p.parse_args()
    from thundervis.recording.group import open_group
    from thundervis.recording.group_store import pack_group

    tmp = args.keep or tempfile.mkdtemp(prefix="rank_scale_")
    os.makedirs(tmp, exist_ok=True)
    try:
        variants = [("default executors", None, 0), ("torch only", ["torch"], 0), ("shorter sequence", None, 4)]
        paths = []
        for k, (what, executors, shorten) in enumerate(variants):
            path = os.path.join(tmp, f"variant{k}.tvrec")
            t0 = time.perf_counter()
            if not (args.reuse and os.path.exists(path)):
                if os.path.exists(path):
                    os.remove(path)
                record_variant(path, executors, shorten)
            paths.append(path)
            print(f"variant {k} ({what}): {os.path.getsize(path) / 2**20:.2f} MiB, recorded in "
                  f"{time.perf_counter() - t0:.1f} s")
        one = os.path.getsize(paths[0])
        group = os.path.join(tmp, "job.tvgroup")
        shutil.rmtree(group, ignore_errors=True)
        os.makedirs(group)
        rng = random.Random(0)
        n_var = len(variants)
        for k, path in enumerate(paths):
            dst = os.path.join(group, f"rank-{k:05d}.tvrec")
            shutil.copy(path, dst)
            _as_rank(dst, k, args.ranks, rng)
        t0 = time.perf_counter()
        packed, left = pack_group(group)
        pack_s = (time.perf_counter() - t0) / max(packed, 1)
        assert packed == n_var and not left
        # Most ranks compile variant 0; every 100th rank one of the others.
        for rank in range(n_var, args.ranks):
            k = (rank // 100) % n_var if rank % 100 == 0 else 0
            dst = os.path.join(group, f"rank-{rank:05d}.tvrec")
            shutil.copy(os.path.join(group, f"rank-{k:05d}.tvrec"), dst)
            _as_rank(dst, rank, args.ranks, rng)
        t0 = time.perf_counter()
        pack_group(group)  # ranks whose traces equal an earlier rank's become .tvrank files
        rank_s = (time.perf_counter() - t0) / max(args.ranks - n_var, 1)
        size, blocks = _disk(group)
        store = os.path.getsize(os.path.join(group, "traces.tvstore"))
        rank_file = os.path.getsize(os.path.join(group, "rank-00005.tvrank"))
        env = dict(os.environ)
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "thundervis", "ls", group], capture_output=True, text=True,
                               env=env)
            times.append(time.perf_counter() - t0)
            assert r.returncode == 0, r.stderr
        t0 = time.perf_counter()
        ov = open_group(group).overview()
        in_process = time.perf_counter() - t0
        assert len(ov.ranks) == args.ranks and len(ov.variants) == n_var, (len(ov.ranks), len(ov.variants))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare = time.perf_counter() - t0
        ls_s = statistics.median(times)
        ratio = size / one
        print(f"one rank (unpacked recording):      {one / 2**20:8.2f} MiB")
        print(f"group of {args.ranks} ranks, {n_var} variants: {size / 2**20:8.2f} MiB in files "
              f"({blocks / 2**20:.2f} MiB in disk blocks): store {store / 2**20:.2f} MiB + "
              f"{args.ranks} rank files of ~{rank_file / 1024:.1f} KiB")
        print(f"packing: {pack_s * 1e3:.0f} ms per variant recording, {rank_s * 1e3:.0f} ms per rank standing on one")
        print(f"size ratio group / one rank:        {ratio:8.2f}x  (target < {SIZE_TARGET}x)  "
              f"{'OK' if ratio < SIZE_TARGET else 'MISSED'}")
        print(f"thundervis ls GROUP:                {ls_s:8.2f} s  (median of {args.repeat}; python -c pass "
              f"takes {bare:.2f} s; overview in-process {in_process:.2f} s)  "
              f"(target < {LS_TARGET} s)  {'OK' if ls_s < LS_TARGET else 'MISSED'}")
        return 0 if ratio < SIZE_TARGET and ls_s < LS_TARGET else 1
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
