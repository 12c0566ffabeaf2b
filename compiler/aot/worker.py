"""Compiling one generated kernel for one GPU target, in a worker process.

:func:`compile_job` runs in a process spawned by :mod:`.pool` (``TRITON_INTERPRET`` removed before
Triton is imported there, so Triton's CUDA backend is live even on a machine without a GPU). The job
holds the kernel's ``@triton.jit`` source as generated in the compiling process from the live IR
(never text read from a recording), its functions' parameter dtypes and warps, and the target. The
source is written to a file of its own (Triton's JIT needs one), each function is compiled with
``triton.compile(ASTSource(fn, signature, {}, attrs), target=GPUTarget("cuda", arch, 32))`` up to
PTX (Triton's own ptxas step is left to the batch), and a batch's functions are assembled with the
ptxas command Triton would run, read with ``cuobjdump`` and disassembled with ``nvdisasm`` (all from
Triton's wheel) once for the whole batch (:mod:`.sass_batch`). The result is a plain dict: stages,
per-line source maps, resources, instruction mix, or the error (ptxas's message) when compilation
fails. It never raises.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import subprocess
import sys
import tempfile
import time
from typing import Optional

from . import machine_code as mc

# torch dtype name -> Triton pointer element type in a kernel signature.
SIGNATURE_TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int64": "i64",
                   "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1"}

_TOOL_TIMEOUT_S = 60
DEFAULT_NICE = 10  # ``$THUNDERVIS_AOT_NICE``: how much lower the workers' priority is than the script's


def prepare_worker() -> None:
    """Worker initializer: Triton must compile for real GPUs here, never interpret; the builds run
    at a lower priority than the user's script (on few cores a build competing with torch's own
    threads slows the run more than the build gains)."""
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    nice = os.environ.get("THUNDERVIS_AOT_NICE", "")
    with contextlib.suppress(OSError, AttributeError):
        os.nice(int(nice) if nice.isdigit() else DEFAULT_NICE)


_WARM_UP_SOURCE = """import triton
import triton.language as tl


@triton.jit
def kernel(arg0, res0):
    offs = tl.program_id(0) * 128 + tl.arange(0, 128)
    tl.store(res0 + offs, tl.load(arg0 + offs, mask=offs < 1000, other=0) * 2.0, mask=offs < 1000)
"""


def warm_up(archs) -> bool:
    """Pay a worker's first-build costs before the first kernel arrives (Triton's and LLVM's
    set-up, ``ptxas --version``: about 0.4 s of CPU on the first build otherwise): compile a small
    kernel to PTX for each of ``archs``, in a throwaway Triton cache (the user's never holds it).
    Return whether it compiled (never raises)."""
    folder = tempfile.mkdtemp(prefix="thundervis-aot-warm-")
    saved = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")
    try:
        for arch in archs:
            job = {"source": _WARM_UP_SOURCE, "arch": int(arch), "folder": folder,
                   "kernels": [{"name": "kernel", "params": [["arg0", "float32"], ["res0", "float32"]], "num_warps": 4}]}
            _, built = _build(job, cubin=not _skip_triton_ptxas())
            _tools_key(built[0][1], int(arch))
        return True
    except Exception:  # noqa: BLE001 - warming up is only an optimisation
        return False
    finally:
        if saved is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = saved
        import shutil
        shutil.rmtree(folder, ignore_errors=True)


def signature(params) -> dict:
    """Return Triton's signature dict for ``params`` ((name, dtype) pairs: all pointers)."""
    return {name: "*" + SIGNATURE_TYPES[dtype] for name, dtype in params}


def compile_job(job: dict) -> dict:
    """Compile ``job`` (``source``, ``kernels`` [{name, params, num_warps}], ``arch``, optional
    ``ptx_options``) and return a dict: ``ok``, ``error``, ``seconds``, ``stages`` {stage: text},
    ``lines`` {stage: [triton line per stage line]}, ``functions`` [per-function resources],
    ``resources`` (the kernel's: max registers, total spills ...), ``mix``; never raises."""
    return compile_jobs([job])[0]


def compile_jobs(jobs: list) -> list:
    """Return :func:`compile_job` of each of ``jobs`` (one target): Triton compiles each function
    to PTX, and all the functions are assembled, read and disassembled together by one ptxas, one
    cuobjdump and one nvdisasm run (:func:`_disassembled_together`); a job that cannot be done that
    way is built again on its own as Triton builds it, its own ptxas included (its ptxas error is
    the recorded one). Never raises."""
    lean = _skip_triton_ptxas()
    started, out = [], []
    for job in jobs:
        t0 = time.perf_counter()
        try:
            path, done = _build(job, cubin=not lean)
        except BaseException as e:  # noqa: BLE001 - a failed build is a recorded result, never a crash
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            path, done = None, {"ok": False, "error": _error_text(e)}
        started.append((job, time.perf_counter() - t0, path, done))
    t0 = time.perf_counter()
    built = [(i, b) for i, (_, _, path, done) in enumerate(started) if path is not None for b in done]
    try:
        tools = _disassembled_together(built, int(jobs[0]["arch"]), _folder(jobs[0])) if jobs else {}
    except Exception:  # noqa: BLE001 - each kernel is then built on its own
        tools = {}
    shared = (time.perf_counter() - t0) / max(1, len(jobs))  # the batch's tools, spread evenly
    for i, (job, seconds, path, done) in enumerate(started):
        t0 = time.perf_counter()
        result = done
        if path is not None:
            try:
                mine = {k["name"]: tools[i, k["name"]] for k, _, _ in done if (i, k["name"]) in tools}
                if len(mine) < len(done) and any(not c.asm.get("cubin") for _, c, _ in done):
                    path, done = _build(job, cubin=True)  # on its own, as Triton builds it
                    mine = {}
                result = _finish(job, path, done, mine)
                result["ok"] = True
            except BaseException as e:  # noqa: BLE001
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                result = {"ok": False, "error": _error_text(e)}
        result["seconds"] = round(seconds + shared + time.perf_counter() - t0, 4)
        out.append(result)
    return out


def _error_text(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    if "ptxas" in text:  # keep ptxas's own message, not the PTX dump Triton adds after it
        keep = [line for line in text.splitlines() if line.strip() and not line.startswith("Repro command")]
        text = "\n".join(keep[:12])
    return text[:4000]


def _module(source: str, folder: str):
    key = hashlib.sha256(source.encode()).hexdigest()[:20]
    path = os.path.join(folder, f"aot_{key}.py")
    if not os.path.isfile(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(f"thundervis_aot_{key}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # kernel text generated by the compiling process from live IR
    return mod, path


def _bin(name: str) -> str:
    import triton
    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)


def _tool(args: list[str], stderr: bool = False) -> str:
    """Run a tool; return its stdout (its stderr with ``stderr``: ptxas's ``-v`` report)."""
    r = subprocess.run(args, capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S)
    if r.returncode != 0:
        raise RuntimeError(f"{os.path.basename(args[0])} failed: {(r.stderr or r.stdout).strip()[:500]}")
    return r.stderr if stderr else r.stdout


def _folder(job: dict) -> str:
    return job.get("folder") or os.path.join(tempfile.gettempdir(), "thundervis-aot")


def _build(job: dict, cubin: bool = True) -> tuple[str, list]:
    """Compile every function of ``job`` with Triton; return (the source file, [(kernel entry,
    compiled kernel, ptxas log)]). Without ``cubin``, Triton stops at PTX (:func:`_skip_triton_ptxas`:
    no cubin, no log; the batch assembles it)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    folder = _folder(job)
    os.makedirs(folder, exist_ok=True)
    mod, path = _module(job["source"], folder)
    arch = int(job["arch"])
    _ask_for_ptxas_log()
    built = []
    for k in job["kernels"]:
        fn = getattr(mod, k["name"])
        params = [tuple(p) for p in k["params"]]
        attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(params))}  # what torch allocations give
        options = {"num_warps": int(k["num_warps"])}
        if job.get("ptx_options"):
            options["ptx_options"] = job["ptx_options"]
        log = io.StringIO()
        with contextlib.redirect_stdout(log), _ptx_only(not cubin):
            compiled = triton.compile(ASTSource(fn, signature(params), {}, attrs),
                                      target=GPUTarget("cuda", arch, 32), options=options)
        built.append((k, compiled, log.getvalue()))
    return path, built


def _finish(job: dict, path: str, built: list, tools: dict) -> dict:
    """Return the result of ``job`` from its compiled functions (:func:`_build`); ``tools``: per
    function name, its machine code already read (``sass``, ``usage``, ``report``:
    :func:`_disassembled_together`); the others are read from their own cubins."""
    import triton
    folder = _folder(job)
    stages = {s: [] for s in mc.STAGES}
    functions = []
    for k, compiled, ptxas_log in built:
        got = tools.get(k["name"])
        if got is not None:
            sass, usage, report = got["sass"], got["usage"], got["report"]
        else:
            sass, usage, report = _read_cubin(compiled, ptxas_log, folder)
        meta = compiled.metadata
        dynamic_shared = int(getattr(meta, "shared", 0) or 0)
        functions.append({
            "name": k["name"], "num_warps": int(k["num_warps"]), "grid": int(k.get("grid", 0)),
            "registers": usage.get("registers", report.get("registers", 0)),
            "spill_store_bytes": report.get("spill_store_bytes", 0),
            "spill_load_bytes": report.get("spill_load_bytes", 0),
            "shared_bytes": usage.get("static_shared_bytes", 0) + dynamic_shared,
            "local_bytes": usage.get("local_bytes", 0), "stack_bytes": usage.get("stack_bytes", 0),
            "num_stages": int(getattr(meta, "num_stages", 0) or 0),
        })
        for s in ("ttir", "ttgir", "llir", "ptx"):
            stages[s].append(compiled.asm[s])
        stages["sass"].append(sass)
    names = [k["name"] for k in job["kernels"]]
    texts = {s: _joined(parts, s, names) for s, parts in stages.items()}
    lines = {s: _joined_lines([mc.line_map(s, t, path) for t in parts]) for s, parts in stages.items()}
    texts["sass"], lines["sass"] = _without_line_comments(texts["sass"], lines["sass"])
    return {"stages": texts, "lines": lines, "functions": functions, "resources": _summary(functions),
            "mix": mc.instruction_mix(texts["sass"]), "triton": triton.__version__, "file": path}


def _ask_for_ptxas_log() -> None:
    """Make Triton print ptxas's ``-v`` report (spill bytes) to stdout, where it is captured."""
    try:
        from triton import knobs
        knobs.nvidia.dump_ptxas_log = True
    except (ImportError, AttributeError):  # older Triton: the environment variable
        os.environ["TRITON_DUMP_PTXAS_LOG"] = "1"


def _tool_cache() -> str:
    root = os.environ.get("THUNDERVIS_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "thundervis")
    return os.path.join(root, "aot")


# Triton's compile cache keys a PTX-only build apart from a full one (its hook adds this to the key).
_PTX_ONLY_KEY = "thundervis-aot-ptx-only-1"


def _skip_triton_ptxas() -> bool:
    """Return whether Triton can stop at PTX (its stage hook exists): the batch then runs ptxas
    once for all its functions instead of Triton once per function (``$THUNDERVIS_AOT_TRITON_PTXAS=1``:
    never)."""
    if os.environ.get("THUNDERVIS_AOT_TRITON_PTXAS") == "1":
        return False
    try:
        from triton import knobs
        return hasattr(knobs.runtime, "add_stages_inspection_hook")
    except (ImportError, AttributeError):
        return False


@contextlib.contextmanager
def _ptx_only(on: bool):
    """While on, Triton's cubin stage is empty (b""): what it would do, ptxas, the batch does."""
    if not on:
        yield
        return
    from triton import knobs

    def hook(*args):
        if not args:  # asked for its part of the cache key
            return _PTX_ONLY_KEY, hashlib.sha256(_PTX_ONLY_KEY.encode()).hexdigest()
        stages = args[1]
        stages["cubin"] = lambda src, metadata: b""
    saved = knobs.runtime.add_stages_inspection_hook
    knobs.runtime.add_stages_inspection_hook = hook
    try:
        yield
    finally:
        knobs.runtime.add_stages_inspection_hook = saved


def _ptxas_command(compiled, arch: int) -> list[str]:
    """Return the ptxas command Triton runs for ``compiled`` (without input and output): same
    options, same order, ``-v`` included."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability
    meta = compiled.metadata
    fmad = [] if getattr(meta, "enable_fp_fusion", True) else ["--fmad=false"]
    extra = [o for o in (getattr(meta, "ptx_options", None) or "").split(" ") if o]
    return [get_ptxas(arch).path, "-lineinfo", *fmad, "-v", "--regAllocOptLevel=2", *extra,
            f"--gpu-name={sm_arch_from_capability(arch)}"]


def _tools_key(compiled, arch: int) -> str:
    """The tool cache's key of a function: its PTX and the ptxas command and version that assemble it."""
    from triton.backends.nvidia.compiler import get_ptxas
    cmd = _ptxas_command(compiled, arch)
    text = "\0".join([compiled.asm["ptx"], get_ptxas(arch).version or "", *cmd[1:]])
    return hashlib.sha256(text.encode()).hexdigest()


def _cached_tools(key: str) -> Optional[dict]:
    """Return what was kept for this function (``sass``, ``usage``, ``report``) or None."""
    import json
    try:
        with open(os.path.join(_tool_cache(), f"{key}.json"), encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError):
        return None
    if not (isinstance(d, dict) and isinstance(d.get("sass"), str)):
        return None
    return {"sass": d["sass"], "usage": d.get("usage") or {}, "report": d.get("report") or {}}


def _keep_tools(key: str, got: dict) -> None:
    """Keep a function's machine code in the tool cache (best effort): a warm run then needs
    neither ptxas nor nvdisasm (nvdisasm alone costs more than a small build)."""
    import json
    if not got.get("report"):  # only a build whose ptxas ran has the spill report worth keeping
        return
    cached = os.path.join(_tool_cache(), f"{key}.json")
    try:
        os.makedirs(_tool_cache(), exist_ok=True)
        tmp = f"{cached}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(got, f)
        os.replace(tmp, cached)
    except OSError:
        pass


def _disassembled_together(built: list, arch: int, folder: str) -> dict:
    """Return ``{(job index, kernel entry name): {"sass", "usage", "report"}}`` for the functions
    of ``built`` ([(job index, (kernel entry, compiled, log))]): from the tool cache, else from one
    ptxas, one cuobjdump and one nvdisasm run over all of them (:mod:`.sass_batch`; entries renamed
    apart, ``j3_kernel_0``, and named back in the text). Functions that Triton assembled itself
    (``asm["cubin"]`` set) are left out when fewer than two need the tools; nothing is returned
    for a function the batch could not make."""
    import re
    from .sass_batch import assemble_together
    out, todo = {}, []
    for i, (k, c, _) in built:
        key = _tools_key(c, arch)
        got = _cached_tools(key)
        if got is not None:
            out[i, k["name"]] = got
        else:
            todo.append((i, k, c, key))
    if not todo or (len(todo) < 2 and all(c.asm.get("cubin") for _, _, c, _ in todo)):
        return out
    names = [f"j{i}_{k['name']}" for i, k, _, _ in todo]
    ptxs = [re.sub(rf"\b{re.escape(k['name'])}(?=\b|_param_)", new, c.asm["ptx"])
            for (_, k, c, _), new in zip(todo, names)]
    made = assemble_together(ptxs, names, folder, _tool, _ptxas_command(todo[0][2], arch),
                             _bin("nvdisasm"), _bin("cuobjdump")) or {}
    for (i, k, _, key), new in zip(todo, names):
        if new in made:
            got = {"sass": re.sub(rf"\b{re.escape(new)}\b", k["name"], made[new]["sass"]),
                   "usage": mc.resource_usage(made[new]["usage"]), "report": mc.ptxas_report(made[new]["log"])}
            _keep_tools(key, got)
            out[i, k["name"]] = got
    return out


def _read_cubin(compiled, ptxas_log: str, folder: str) -> tuple[str, dict, dict]:
    """Return (SASS from ``nvdisasm -gi``, ``cuobjdump -res-usage`` figures, ptxas report) of a
    function Triton assembled itself (its own cubin and ptxas log), kept in the tool cache."""
    key = _tools_key(compiled, int(compiled.metadata.target.arch))
    got = _cached_tools(key)
    if got is not None:
        return got["sass"], got["usage"], got["report"]
    with tempfile.NamedTemporaryFile(suffix=".cubin", dir=folder, delete=False) as f:
        f.write(compiled.asm["cubin"])
        path = f.name
    try:
        sass = _tool([_bin("nvdisasm"), "-gi", "-c", path])
        usage = mc.resource_usage(_tool([_bin("cuobjdump"), "-res-usage", path]))
    finally:
        os.remove(path)
    got = {"sass": sass, "usage": usage, "report": mc.ptxas_report(ptxas_log)}
    _keep_tools(key, got)
    return got["sass"], got["usage"], got["report"]


def _joined(parts: list[str], stage: str, names: list[str]) -> str:
    if len(parts) == 1:
        return parts[0]
    mark = ";" if stage == "llir" else "//"
    return "\n".join(f"{mark} ---- {name} ----\n{text.rstrip(chr(10))}" for name, text in zip(names, parts))


def _without_line_comments(sass: str, lines: list[int]) -> tuple[str, list[int]]:
    """Drop nvdisasm's ``//## File ...`` comments (each instruction carries its line in the map)."""
    keep = [(t, n) for t, n in zip(sass.splitlines(), lines) if not t.lstrip().startswith("//##")]
    return "\n".join(t for t, _ in keep) + "\n", [n for _, n in keep]


def _joined_lines(maps: list[list[int]]) -> list[int]:
    if len(maps) == 1:
        return maps[0]
    return [n for m in maps for n in [0] + m]


def _summary(functions: list[dict]) -> dict:
    """The kernel's resources: the worst function's registers and shared memory, total spills."""
    # ``spills`` is what Triton reports as ``n_spills`` for a loaded kernel: local memory per
    # thread in 4-byte words (ptxas's spill store/load byte counts are kept beside it).
    return {"registers": max(f["registers"] for f in functions),
            "spills": max(f["local_bytes"] for f in functions) // 4,
            "spill_store_bytes": sum(f["spill_store_bytes"] for f in functions),
            "spill_load_bytes": sum(f["spill_load_bytes"] for f in functions),
            "shared_bytes": max(f["shared_bytes"] for f in functions),
            "local_bytes": max(f["local_bytes"] for f in functions),
            "num_warps": max(f["num_warps"] for f in functions)}


if __name__ == "__main__":  # pragma: no cover - manual use: python -m ... < job.json
    import json
    prepare_worker()
    print(json.dumps(compile_job(json.load(sys.stdin)))[:2000])
