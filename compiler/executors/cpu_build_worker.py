"""The worker process that compiles CPU regions with Inductor, off the training process.

``python -m thundervis.compiler.executors.cpu_build_worker`` reads one JSON request per line on
stdin and answers one JSON line per request on stdout:

- request: ``{"id": n, "region": <a one-symbol trace, the serialized JSON format>, "args": [{"shape",
  "stride", "offset", "dtype"}...], "out": "<folder>"}``;
- answer: ``{"id": n, "path": "<folder>/region.so", "seconds": s}`` or ``{"id": n, "error": "one line"}``,
  each with the ``"priority"`` the worker runs at (:func:`_background`);
- ``{"id": n, "warm": true, "out": "<folder>"}`` asks for :func:`warm` (its answer is not waited for).

The region is rebuilt through the same validating loader as recordings
(:func:`~..serialize.executable_trace_from_dict`: grammar plus the registry's allow-list), turned into
the torch path's function (:func:`.cpu_path.torch_region`, generated from the validated IR), traced
with ``make_fx`` on example tensors of the requested metadata and compiled ahead of time by
AOTInductor into one plain shared library (``region.so``: its C++ kernels and its C++ wrapper, no
Python in it) in ``out``. The training process loads that file with torch's C++ AOTI runner
(:func:`.cpu_builds.load`): it never imports Inductor nor unpickles anything, so taking the built
code costs it a ``dlopen``, not seconds of Python holding the GIL. Tracing and Inductor's compile set
process-wide state (the FX tracing flag, the RNG state they save and restore, config patches): here
they touch nobody's training.

The worker is a background job: it runs under Linux's ``SCHED_IDLE`` policy where there is one
(else at nice 10), which its C++ compiler processes inherit, and one compile thread and one OpenMP
thread (set by the parent), so that on a machine with few cores the training threads keep their
cores: a build uses only time nobody else wants. That holds only inside the training's session
(:mod:`.cpu_builds` starts it there, in a process group of its own): under autogroup scheduling a
session of its own would be shared the CPU fairly with the training's, SCHED_IDLE or not. On a machine that is busy with other work a build
may then take long or never finish; its region keeps running through torch meanwhile, which is
what it did before any build.

A worker whose training process is gone (killed: its ``atexit`` close never ran) ends within
:data:`PARENT_POLL_S`, with the compilers of its process group, and removes the build folder
(:func:`_watch_parent`): closed stdin alone is not enough, as a build in progress reads no stdin
and a process forked by training (a data loader's worker) may hold the pipe open.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time

from .cpu_builds import FOLDER_ENV, PARENT_ENV, SHARED_LIBRARY

# Where SCHED_IDLE is missing. Measured on a quiet 2-core box (benchmarks/step_stalls.py, example
# GPT, 2 OpenMP training threads): at nice 10 the median step while regions built was 97 ms against
# eager's 2.9 ms (training threads kept losing their core to the compiler); under SCHED_IDLE 19 ms.
NICE = 10
# How often the worker checks that its training process is still there.
PARENT_POLL_S = 0.5


def _examples(specs: list) -> list:
    """Tensors of the requested sizes, strides and dtypes (values do not matter to a compile)."""
    import torch

    from ..values import torch_constant
    out = []
    for s in specs:
        dtype = torch_constant("dtype", s["dtype"])
        shape, stride, offset = [int(x) for x in s["shape"]], [int(x) for x in s["stride"]], int(s["offset"])
        extent = offset + 1 + sum((n - 1) * st for n, st in zip(shape, stride) if n > 0)
        base = torch.zeros(max(extent, 1), dtype=dtype)
        out.append(torch.as_strided(base, shape, stride, offset))
    return out


def warm(out: str) -> dict:
    """Compile a one-op function into ``out``: the first AOTInductor compile of a process (and of a
    fresh cache folder) costs several times a region's (imports, the CPU's vector ISA probed by
    compiling test programs, precompiled headers), and the training process asks for this as soon
    as a region qualifies, so that this is paid while the region proves hot; return the answer."""
    import torch
    import torch._inductor
    from torch.fx.experimental.proxy_tensor import make_fx
    t0 = time.perf_counter()
    os.makedirs(out, mode=0o700, exist_ok=True)
    x = torch.zeros(16)
    with torch.no_grad():
        gm = make_fx(lambda a: (torch.ops.aten.mul.Tensor(a, 2.0),), tracing_mode="fake")(x)
        torch._inductor.aot_compile(gm, (x,), options={"aot_inductor.package": False, "compile_threads": 1,
                                                        "aot_inductor.output_path": os.path.join(out, SHARED_LIBRARY)})
    return {"warm": True, "seconds": time.perf_counter() - t0}


def build(request: dict) -> dict:
    """Compile one requested region (see the module doc); return the answer."""
    import torch
    import torch._inductor
    from torch.fx.experimental.proxy_tensor import make_fx

    from ..serialize import executable_trace_from_dict
    from .cpu_path import torch_region
    t0 = time.perf_counter()
    trace = executable_trace_from_dict(request["region"])
    if len(trace.symbols) != 1:
        raise ValueError("a region request holds exactly one fusion symbol")
    fn = torch_region(trace.symbols[0])
    examples = _examples(request["args"])
    out = str(request["out"])
    os.makedirs(out, mode=0o700, exist_ok=True)  # inside the parent's 0700 folder
    so = os.path.join(out, SHARED_LIBRARY)
    with torch.no_grad():
        # One fake mode for every value the graph records: in "real" mode each value gets its
        # own, and AOTInductor refuses inputs of different fake modes.
        gm = make_fx(fn, tracing_mode="fake")(*examples)
        built = torch._inductor.aot_compile(gm, tuple(examples), options={
            "aot_inductor.package": False, "aot_inductor.output_path": so, "compile_threads": 1})
    if built != so or not os.path.isfile(so):
        raise RuntimeError(f"AOTInductor wrote {built!r}, not the requested {SHARED_LIBRARY}")
    return {"path": so, "seconds": time.perf_counter() - t0}


def _watch_parent(parent: int, folder: str) -> None:
    """Return once ``parent`` is no longer this process's parent, having removed ``folder`` (the
    build folder it made for us, if named) and ended this worker's process group: itself and its
    C++ compilers. The group is ours only when we lead it (see :func:`main`); otherwise only this
    process ends."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
    if os.getpgid(0) == os.getpid():
        os.killpg(0, signal.SIGKILL)
    os._exit(1)


def _background() -> str:
    """Make this process a background job (the training process comes first); return what it got:
    ``SCHED_IDLE``, ``nice 10`` or ``normal`` (every answer says it: the recording keeps it)."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return "SCHED_IDLE"
    except (OSError, AttributeError):  # not Linux, or not allowed
        try:
            os.nice(NICE)
            return f"nice {NICE}"
        except (OSError, AttributeError):
            return "normal"


def main() -> int:
    """Serve requests until stdin closes or the training process is gone."""
    parent = os.environ.get(PARENT_ENV, "")
    if parent and os.getpgid(0) != os.getpid():  # Python 3.10's Popen cannot make the group for us
        try:
            os.setpgid(0, 0)
        except OSError:
            pass
    # Started before the policy below changes (per thread on Linux): a busy box never starves it.
    threading.Thread(target=_watch_parent, args=(int(parent) if parent.isdigit() else os.getppid(),
                                                  os.environ.get(FOLDER_ENV, "")),
                     name="thundervis-cpu-build-parent", daemon=True).start()
    priority = _background()
    import warnings
    warnings.simplefilter("ignore")
    for line in sys.stdin:
        try:
            request = json.loads(line)
            rid = request.get("id")
        except (ValueError, AttributeError):
            continue
        try:
            answer = warm(str(request["out"])) if request.get("warm") is True else build(request)
        except BaseException as e:  # one region's failure is its answer; the worker goes on
            first = str(e).splitlines()[0][:200] if str(e) else ""
            answer = {"error": f"{type(e).__name__}: {first}"}
        answer["id"], answer["priority"] = rid, priority
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
