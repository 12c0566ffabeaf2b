"""What folding repeated layers saves: kernel source generated once per distinct region
(compiler/executors/generated_once.py) and recorded once (recording/kernel_folds.py).

One training step of a tiny Llama (``_compile_scale.llama``, random init, no download) is compiled
by thundervis with the recording on, twice, each in a fresh process: as shipped, and with folding
turned off inside the benchmark (the generation memo bypassed, the kernels recorded without their
fold key). It prints, for each: the step's wall time, the CPU seconds spent generating kernel
source and how many modules were generated, the kernels and folds recorded, the stored kernel
texts and the recording's size.

    python benchmarks/fold_scale.py [--layers 8]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _unfold() -> None:
    """Turn folding off in this process: every region generates its own module, and the kernels are
    recorded without the fold key (so none folds)."""
    from thundervis.compiler.executors import generated_once as go, triton_plan
    import thundervis.recording.writer as writer

    def every_time(members, outputs, device_kind, phase_limit, make):
        ks = make()
        go.stats["asked"] += 1
        go.stats["generated"] += 1
        return go.fill(ks, ks.listed, {})
    triton_plan.generated_once = every_time
    insert = writer.insert_kernels

    def without_keys(c, graph, chain, kernels, as_json, keys):
        return insert(c, graph, chain, [{k: v for k, v in d.items() if k != "fold_key"} for d in kernels], as_json, keys)
    writer.insert_kernels = without_keys


def measure(layers: int, folded: bool) -> dict:
    """Compile one step of a ``layers``-deep tiny Llama into a recording; return what it cost."""
    import sqlite3

    from _compile_scale import first_step_seconds, llama
    from thundervis.compiler import ThundervisCompiler
    from thundervis.compiler.backend import reset_graph_ids
    from thundervis.compiler.executors import generated_once as go, triton_plan
    from thundervis.recording import RecordingObserver
    if not folded:
        _unfold()
    spent = {"cpu_s": 0.0}
    generate = triton_plan._generate

    def timed(*args, **kwargs):
        check = kwargs.get("check", args[5] if len(args) > 5 else False)
        t0 = time.process_time()
        try:
            return generate(*args, **kwargs)
        finally:
            if not check:
                spent["cpu_s"] += time.process_time() - t0
    triton_plan._generate = timed
    model, ids = llama(layers)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fold.tvrec")
        rec = RecordingObserver(path)
        rec.start_run(script=__file__, module=None, argv=sys.argv, cwd=os.getcwd())
        reset_graph_ids()
        wall = first_step_seconds(model, ids, ThundervisCompiler(observer=rec, cache=False))
        rec.finish_run("ok", 0)
        rec.close()
        conn = sqlite3.connect(path)
        try:
            kernels, texts = conn.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(code)), 0)"
                                          " + COALESCE(SUM(LENGTH(trace_json)), 0) FROM kernels").fetchone()
            folds = conn.execute("SELECT COUNT(*) FROM kernel_folds").fetchone()[0]
            conn.execute("VACUUM")
        finally:
            conn.close()
        size = os.path.getsize(path)
    return {"wall_s": wall, "generate_cpu_s": spent["cpu_s"], "generated": go.stats["generated"],
            "asked": go.stats["asked"], "kernels": kernels, "folds": folds, "kernel_text_bytes": texts,
            "recording_bytes": size}


def compare(layers: int) -> dict:
    """Return {"unfolded": ..., "folded": ...}: :func:`measure` of each mode, in a fresh process each;
    RuntimeError (one sentence) when a run fails."""
    results = {}
    for mode in ("unfolded", "folded"):
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--layers", str(layers), "--one", mode],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"the {mode} run failed: {proc.stderr.strip().splitlines()[-1:]}")
        results[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    return results


def main(argv=None) -> int:
    """Run both modes in fresh processes and print them side by side; 0 on success."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=8, help="decoder layers (default 8)")
    p.add_argument("--one", choices=("folded", "unfolded"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.layers, args.one == "folded")))
        return 0
    try:
        results = compare(args.layers)
    except RuntimeError as e:
        print(str(e), file=sys.stderr)
        return 1
    print(f"tiny Llama, {args.layers} layers, one training step (load: {os.getloadavg()[0]:.1f})")
    rows = [("step wall s", "wall_s", "{:.2f}"), ("kernel source generation CPU s", "generate_cpu_s", "{:.3f}"),
            ("modules generated / asked", None, None), ("kernels recorded", "kernels", "{}"),
            ("kernels folded", "folds", "{}"), ("stored kernel code + IR bytes", "kernel_text_bytes", "{:,}"),
            ("recording bytes (vacuumed)", "recording_bytes", "{:,}")]
    print(f"{'':34} {'unfolded':>14} {'folded':>14}")
    for label, key, fmt in rows:
        cells = [f"{r['generated']}/{r['asked']}" if key is None else fmt.format(r[key])
                 for r in (results["unfolded"], results["folded"])]
        print(f"{label:34} {cells[0]:>14} {cells[1]:>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
