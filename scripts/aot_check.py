"""On a CUDA machine: compare what ahead-of-time compilation recorded for the local GPU with the
kernels Triton actually loaded in the same run (``CompiledKernel.n_regs`` / ``n_spills``).

Runs the GPT example in this process with the triton executor and ``targets="local"``, then, for
every recorded build, finds the generated module the executor imported (same Triton text: the run
and the build both use the CUDA plan) and reads each ``@triton.jit`` function's loaded kernels.
Prints one line per kernel and a summary; exit 0 when every compared kernel has the same registers
and spills, 1 when one differs, 2 without CUDA (nothing to compare).
"""
from __future__ import annotations

import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def loaded_kernels(module, name: str) -> list:
    """Return the CompiledKernels Triton loaded for jit function ``name`` of ``module``."""
    fn = getattr(module, name, None)
    out = []
    for cache in (getattr(fn, "device_caches", None) or {}).values():
        kernels = cache[0] if isinstance(cache, tuple) else cache
        out += [k for k in kernels.values() if hasattr(k, "n_regs")]
    return out


def main() -> int:
    import torch
    if not torch.cuda.is_available():
        print("aot_check: no CUDA device; nothing to compare.")
        return 2
    from thundervis.compiler.executors import triton_executor
    from thundervis.recording import open_recording
    from thundervis.runner import run_target
    out = os.path.join(tempfile.mkdtemp(prefix="aot-check-"), "aot.tvrec")
    sys.argv = [os.path.join(ROOT, "examples", "train_gpt.py")]
    result = run_target(script=sys.argv[0], module=None, args=["--steps", "2"], out=out,
                        executors=["triton"], targets="local")
    if result.exit_code != 0:
        print(f"aot_check: the example failed (exit {result.exit_code}); see {out}")
        return 1
    modules = {}
    for path, mod in triton_executor._MODULES.items():
        try:
            with open(path, encoding="utf-8") as f:
                modules[path] = (f.read(), mod)
        except OSError:
            pass
    same = differ = missing = 0
    with open_recording(out) as rec:
        builds = rec.kernel_builds()
        print(f"{'kernel':<16} {'target':<7} {'aot regs':>8} {'gpu regs':>8} {'aot spills':>10} {'gpu spills':>10}")
        for b in builds:
            if b.status != "ok":
                print(f"{b.kernel:<16} {b.target:<7} {b.status}: {(b.error or '').splitlines()[:1]}")
                missing += 1
                continue
            stages = rec.build_stages(b)
            body = "\n".join(stages.source.splitlines()[2:]).strip()
            mod = next((m for text, m in modules.values() if body and body in text), None)
            loaded = [k for f in b.plan.get("kernels") or [] for k in loaded_kernels(mod, f["name"])] if mod else []
            if not loaded:
                print(f"{b.kernel:<16} {b.target:<7} {b.registers:>8} {'-':>8} {b.spills:>10} {'-':>10}  not loaded")
                missing += 1
                continue
            regs = max(k.n_regs for k in loaded)
            spills = max(k.n_spills for k in loaded)
            ok = regs == b.registers and spills == b.spills
            same += ok
            differ += not ok
            print(f"{b.kernel:<16} {b.target:<7} {b.registers:>8} {regs:>8} {b.spills:>10} {spills:>10}"
                  f"{'' if ok else '  DIFFERS'}")
    print(f"aot_check: {same} kernels match, {differ} differ, {missing} not compared")
    return 0 if differ == 0 and same > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
