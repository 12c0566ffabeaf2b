"""Abstract runs of Llama-3-8B and -70B training steps: wall time, peak RSS, recording size, the answer.

``python benchmarks/abstract_scale.py [8b|70b|tiny ...] [--layers N] [--seq S]`` writes a training
script for each config (``transformers.LlamaConfig``, random init, bf16, batch 1, AdamW, one step),
runs ``thundervis run --abstract --target sm_90 --gpu h100,h200,a100,b200`` on it in a child process,
and prints the wall time, the peak RSS of the run's process tree (sampled from /proc every 0.25 s,
and the run process's own ``ru_maxrss``), the recording's size and the run's answer (its printed
lines), with the targets of issue 39 beside them. Nothing is allocated: the model lives on fake tensors.
Triton's kernel cache starts empty (a folder of its own beside the script), as on a new user's first
run; ``--warm-triton`` keeps the caller's. Our compile cache is never used by an abstract run.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time

CONFIGS = {  # name: (layers, hidden, ffn, heads, kv heads, vocab, seq, targets (minutes, GB RSS, MB recording))
    "tiny": (2, 256, 512, 4, 2, 1024, 128, (5, 8, 50)),
    "8b": (32, 4096, 14336, 32, 8, 128256, 4096, (5, 8, 50)),
    "70b": (80, 8192, 28672, 64, 8, 128256, 4096, (15, 12, None)),
}

SCRIPT = '''import sys
sys.path.insert(0, {bench!r})
from model_zoo import import_torchvision
import_torchvision()  # PyPI's torchvision beside the CPU torch wheel (see model_zoo)
import torch, transformers
cfg = transformers.LlamaConfig(vocab_size={vocab}, hidden_size={hidden}, intermediate_size={ffn},
                               num_hidden_layers={layers}, num_attention_heads={heads}, num_key_value_heads={kv},
                               max_position_embeddings=8192, rope_theta=500000.0, attn_implementation="sdpa")
device = "cuda" if torch.cuda.is_available() else "cpu"
model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
step = torch.compile(model)
ids = torch.randint(0, {vocab}, (1, {seq}), device=device)
loss = step(input_ids=ids, labels=ids).loss
loss.backward()
opt.step()
opt.zero_grad()
print(f"loss {{loss.item():.4f}}")
'''


def _tree_rss(pid: int) -> int:
    """Return the summed RSS (bytes) of ``pid`` and its descendants, from /proc."""
    children: dict = {}
    total = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(parts[1]), []).append(int(d))
        except OSError:
            continue
    todo = [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
    return total


def run(name: str, layers=None, seq=None, timeout: float = 3600, warm_triton: bool = False) -> dict:
    """Run one config abstractly (Triton's kernel cache empty unless ``warm_triton``); return its
    measurements."""
    L, h, ffn, heads, kv, vocab, s, targets = CONFIGS[name]
    L, s = layers or L, seq or s
    folder = tempfile.mkdtemp(prefix=f"abstract-{name}-")
    script, out = os.path.join(folder, "train.py"), os.path.join(folder, "run.tvrec")
    with open(script, "w") as f:
        f.write(SCRIPT.format(bench=os.path.dirname(os.path.abspath(__file__)), vocab=vocab, hidden=h, ffn=ffn, layers=L, heads=heads, kv=kv, seq=s))
    cmd = [sys.executable, "-m", "thundervis", "run", "--abstract", "--target", "sm_90", "--gpu",
           "h100,h200,a100,b200", "--no-view", "--out", out, script]
    t0 = time.perf_counter()
    env = dict(os.environ)
    if not warm_triton:  # every distinct kernel compiled for sm_90 from scratch, as on a first run
        env["TRITON_CACHE_DIR"] = os.path.join(folder, "triton-cache")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            done.wait(0.25)
    threading.Thread(target=sample, daemon=True).start()
    try:
        text, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        text, _ = proc.communicate()
    done.set()
    wall = time.perf_counter() - t0
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder) if f.startswith("run.tvrec"))
    return {"config": name, "layers": L, "seq": s, "exit": proc.returncode, "wall_s": round(wall, 1),
            "peak_rss_tree_gb": round(peak[0] / 1e9, 2),
            "run_maxrss_gb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e9, 2),
            "recording_mb": round(size / 1e6, 1), "recording": out, "targets": targets,
            "answer": [ln for ln in text.splitlines() if ln.startswith("thundervis:")][-16:],
            "tail": text.splitlines()[-5:]}


def main() -> int:
    """Run the configs named on the command line (default: 8b) and print their measurements."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="*", default=["8b"], choices=sorted(CONFIGS))
    ap.add_argument("--layers", type=int, default=None, help="override the layer count")
    ap.add_argument("--seq", type=int, default=None, help="override the sequence length")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--warm-triton", action="store_true",
                    help="keep Triton's kernel cache (by default each run starts with an empty one)")
    a = ap.parse_args()
    for name in a.configs:
        r = run(name, a.layers, a.seq, warm_triton=a.warm_triton)
        if a.json:
            print(json.dumps(r))
            continue
        minutes, gb, mb = r["targets"]
        print(f"{name}: {r['layers']} layers, seq {r['seq']}: exit {r['exit']}, wall {r['wall_s']} s "
              f"(target {minutes} min), peak RSS {r['peak_rss_tree_gb']} GB process tree / "
              f"{r['run_maxrss_gb']} GB run process (target {gb} GB), recording {r['recording_mb']} MB"
              + (f" (target {mb} MB)" if mb else "") + f"  [{r['recording']}]")
        for line in r["answer"]:
            print("   " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
