"""Recording size: a 1-step training of a tiny Llama (8 layers by default) recorded by
``thundervis run``, next to the TORCH_TRACE log of the same training under Inductor.

The same script runs twice, each in a fresh process: ``thundervis run --no-view`` (our compiler, the
default executors, the recording written to a temporary folder) and plain ``python`` with
``torch.compile``'s default backend and ``TORCH_TRACE=<dir>`` (the structured trace log tlparse
reads; every file of the folder is counted). Both sizes are printed with their ratio. Target: the
recording is no bigger than the TORCH_TRACE log (ratio <= 1.0). The model is built from a
``transformers`` config (random init, no download).

    python benchmarks/recording_size.py [--layers 8] [--keep DIR]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time

TARGET = 1.0

SCRIPT = textwrap.dedent('''
    import sys
    import torch

    try:  # PyPI's torchvision beside the CPU torch wheel: declare the two ops its import registers
        import torchvision  # noqa: F401  (transformers imports it)
    except RuntimeError:
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        lib = torch.library.Library("torchvision", "FRAGMENT")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    import transformers

    torch.manual_seed(0)
    layers = int(sys.argv[1])
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    compiled = torch.compile(model)
    ids = torch.randint(0, 128, (2, 16))
    loss = compiled(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    print("loss", float(loss))
''')


def _cli() -> list[str]:
    exe = shutil.which("thundervis")
    return [exe] if exe else [sys.executable, "-m", "thundervis"]


def _folder_size(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def _table_sizes(path: str) -> dict:
    """Bytes per table (SQLite's dbstat) when this SQLite has it; {} otherwise."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
        conn.close()
        return dict(rows)
    except sqlite3.Error:
        return {}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--keep", metavar="DIR", help="keep the recording and the log in DIR")
    args = parser.parse_args(argv)
    folder = args.keep or tempfile.mkdtemp(prefix="tv-size-")
    os.makedirs(folder, exist_ok=True)
    script = os.path.join(folder, "train_llama.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    try:
        rec = os.path.join(folder, "llama.tvrec")
        t0 = time.perf_counter()
        subprocess.run(_cli() + ["run", "--no-view", "--out", rec, script, str(args.layers)], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        t_rec = time.perf_counter() - t0
        rec_size = sum(os.path.getsize(p) for p in (rec, rec + "-wal") if os.path.exists(p))
        trace_dir = os.path.join(folder, "torch_trace")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, script, str(args.layers)], check=True, stdout=subprocess.DEVNULL,
                       env=dict(env, TORCH_TRACE=trace_dir))
        t_log = time.perf_counter() - t0
        log_size = _folder_size(trace_dir)
        print(f"tiny Llama, {args.layers} layers, 1 training step")
        print(f"  thundervis recording  {rec_size / 1e6:8.2f} MB   ({t_rec:.0f} s to run)")
        for name, size in list(_table_sizes(rec).items())[:6]:
            print(f"      {name:24s} {size / 1e6:8.2f} MB")
        print(f"  TORCH_TRACE log       {log_size / 1e6:8.2f} MB   ({t_log:.0f} s to run under Inductor)")
        ratio = rec_size / log_size if log_size else float("inf")
        verdict = "ok" if ratio <= TARGET else "over"
        print(f"  ratio recording / log  {ratio:.2f}x (target <= {TARGET:.1f}x: {verdict})")
        return 0 if ratio <= TARGET else 1
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
