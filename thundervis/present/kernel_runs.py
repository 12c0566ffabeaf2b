"""What ran each kernel, where, and which kernels fell back at run time: the one owner of these
rules for every view (:mod:`.status` composes them into chain and run status).

A Triton fusion's kernel is generated (and, with ``--target``, compiled) for a GPU, but what runs it
depends on the machine: a compiled Triton kernel on a GPU, Triton's interpreter, or, without CUDA
and with the default executors, the fast CPU path (the region's ATen ops through torch, or Inductor),
chosen by measuring (``kernel_path`` events; a ``kernel_fallback`` means torch ran it):
``fw_fusion_3 [triton · ran on cpu via torch]``, ``fw_fusion_3 [triton sm_90 · ran on cpu via torch]``.
:func:`kernel_fallbacks` is the one reader of run-time fallback events; :func:`kernel_runs`,
:func:`ran_on_text`, :func:`kernel_label`, :func:`kernel_tag` and :func:`built_targets` say what ran
each kernel; :func:`clock_label` names what a profiled time measured, so a CPU time never reads as a
GPU time.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterable, Optional


def source_label(file, line) -> Optional[str]:
    """Return ``file.py:12`` (the file's base name) for a recorded source line, None without a line."""
    if not line:
        return None
    return f"{os.path.basename(str(file or '?'))}:{line}"


@dataclass(frozen=True)
class KernelFallback:
    """A generated kernel that failed at run time and ran its region in torch instead (one
    ``kernel_fallback`` event): where, which kernel, which executor built it, why."""

    graph: Optional[int]
    chain: Optional[str]
    kernel: str
    executor: str
    uid: Optional[str]
    error: str
    sources: tuple  # ``file.py:LINE`` labels of the lines the kernel covers

    def as_json(self) -> dict:
        """Return the fallback as a JSON-ready dict."""
        return {"graph": self.graph, "chain": self.chain, "kernel": self.kernel, "executor": self.executor,
                "uid": self.uid, "error": self.error, "sources": list(self.sources)}


def kernel_fallbacks(events) -> list[KernelFallback]:
    """Return the run-time kernel fallbacks among ``events`` (``Recording.events()``): the one
    reader of ``kernel_fallback`` events."""
    out = []
    for e in events:
        if e.event != "kernel_fallback":
            continue
        d = e.data if isinstance(e.data, dict) else {}
        name = d.get("kernel")
        if not isinstance(name, str):
            continue
        srcs = [s for s in d.get("sources") or [] if isinstance(s, dict)]
        labels = tuple(filter(None, (source_label(s.get("file"), s.get("line")) for s in srcs)))
        uid = d.get("uid") if isinstance(d.get("uid"), str) else None
        out.append(KernelFallback(e.graph, e.chain, name, str(d.get("executor") or "kernel"), uid,
                                  " ".join(str(d.get("error") or "").split()), labels))
    return out



# The paths the compiler reports (compiler/executors/cpu_path.py VIA_*); anything else is shown as
# "unknown" (recordings are untrusted input).
PATHS = ("triton", "triton-interpreter", "torch", "inductor", "nvfuser")
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class KernelRun:
    """How one kernel ran: ``device`` (``cpu``, ``cuda``), ``via`` (one of :data:`PATHS`),
    ``measured`` (False: only the plan made at build time is known, the kernel never ran),
    ``torch_us``/``inductor_us`` (the fast CPU path's first-call measurements, µs per call, None
    when not measured) and ``why`` (the reason of the choice, or of a run-time fallback)."""

    device: str
    via: str
    measured: bool = False
    torch_us: Optional[float] = None
    inductor_us: Optional[float] = None
    why: str = ""
    fell_back: bool = False  # its kernel failed at run time and torch ran the region instead
    copied: tuple = ()  # names of inputs copied into their recorded layout on every call

    def as_json(self) -> dict:
        """Return the ``ran_on`` object of ``ls --json``: device, via, measured, torch_us,
        inductor_us, why, fell_back, copied (input names) and ``text`` (what views print)."""
        return {"device": self.device, "via": self.via, "measured": self.measured, "torch_us": self.torch_us,
                "inductor_us": self.inductor_us, "why": self.why, "fell_back": self.fell_back,
                "copied": list(self.copied), "text": ran_on_text(self)}


def _number(v) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v >= 0 else None


def _choice(v, allowed: tuple) -> str:
    return v if isinstance(v, str) and v in allowed else "unknown"


def run_from_event(data) -> Optional[KernelRun]:
    """Return the :class:`KernelRun` a ``kernel_path`` event's data says (None when it is not an
    object naming a kernel); every field is validated, unknown values read ``unknown``."""
    if not isinstance(data, dict) or not isinstance(data.get("kernel"), str):
        return None
    why = data.get("why")
    return KernelRun(_choice(data.get("device"), DEVICES), _choice(data.get("via"), PATHS),
                     data.get("planned") is not True, _number(data.get("torch_us")),
                     _number(data.get("inductor_us")), " ".join(why.split())[:300] if isinstance(why, str) else "",
                     copied=_copied_names(data.get("copied_inputs")))


def _copied_names(items) -> tuple:
    """The value names of a ``kernel_path`` event's ``copied_inputs`` (validated: a list of
    objects whose ``name`` is an identifier of at most 40 characters; anything else is left out)."""
    if not isinstance(items, list):
        return ()
    names = [d.get("name") for d in items[:64] if isinstance(d, dict)]
    return tuple(n for n in names if isinstance(n, str) and _NAME.fullmatch(n))


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


def kernel_runs(events) -> dict:
    """Return {(graph, chain, kernel name): KernelRun} from a recording's ``events``
    (``Recording.events()``): the last ``kernel_path`` event of each kernel (a measured one beats a
    plan), and torch for a kernel that fell back at run time (:func:`kernel_fallbacks`). Kernels
    with neither (older recordings, other executors) are absent."""
    out: dict = {}
    for e in events:
        if e.event != "kernel_path":
            continue
        run = run_from_event(e.data)
        if run is not None:
            key = (e.graph, e.chain, e.data["kernel"])
            if run.measured or not (key in out and out[key].measured):
                out[key] = run
    for f in kernel_fallbacks(events):
        key = (f.graph, f.chain, f.kernel)
        device = out[key].device if key in out else "unknown"
        out[key] = KernelRun(device, "torch", True, why=f"fell back at run time: {f.error[:300]}", fell_back=True)
    return out


FELL_BACK_TEXT = "ran in torch at run time"  # a kernel that failed with no recorded path: torch ran its region


def path_text(run: Optional[KernelRun]) -> str:
    """Return where and how a kernel ran, for a table column: ``cpu via torch`` (``... (fell
    back)`` for a run-time fallback; "" for None)."""
    if run is None:
        return ""
    return _device_via(run) + (" (fell back)" if run.fell_back else "")


def ran_on_text(run: Optional[KernelRun]) -> str:
    """Return ``ran on cpu via torch`` (``runs on ...`` for a plan never run, ``... after its kernel
    failed`` for a run-time fallback; "" for None)."""
    if run is None:
        return ""
    verb = "ran on" if run.measured else "runs on"
    copied = ""
    if run.copied and not run.fell_back:
        names = ", ".join(run.copied[:3]) + (f" and {len(run.copied) - 3} more" if len(run.copied) > 3 else "")
        copied = f", copying {names} into the recorded layout each call"
    return f"{verb} {_device_via(run)}" + (" after its kernel failed" if run.fell_back else copied)


def _device_via(run: KernelRun) -> str:
    """``cpu via torch``: the device and the path, the one wording :func:`path_text` (a table
    column) and :func:`ran_on_text` (a sentence) share."""
    return f"{run.device} via {run.via}"


def plan_note(note: Optional[str], run: Optional[KernelRun] = None, targets: Iterable[str] = ()) -> Optional[str]:
    """Return a kernel's generator note as views show it: as is, or, for a kernel also compiled
    for GPU ``targets``, headed by the device its note describes (``cpu plan: ...``): the recorded
    kernel is planned for the run's own device, each target's build is planned apart (its own
    grid and launches), so the note must not read as the target's plan."""
    if not note or not tuple(targets) or run is None or not run.device:
        return note
    return f"{run.device} plan: {note}"


def kernel_tag(executor: str, run: Optional[KernelRun] = None, targets: Iterable[str] = ()) -> str:
    """Return what a kernel's label says in brackets: ``triton sm_90 · ran on cpu via torch``
    (``targets``: the GPU archs it was compiled for; ``run``: how it ran, see :func:`kernel_runs`)."""
    return tag_text(executor, ran_on_text(run), targets)


def tag_text(executor: str, ran_on: str = "", targets: Iterable[str] = ()) -> str:
    """Return :func:`kernel_tag` from the ``ran_on`` text already made (:func:`ran_on_text`)."""
    head = " ".join([executor, *targets])
    return f"{head} · {ran_on}" if ran_on else head


def kernel_label(name: str, executor: str, run: Optional[KernelRun] = None, targets: Iterable[str] = ()) -> str:
    """Return how views name a kernel: ``fw_fusion_3 [triton sm_90 · ran on cpu via torch]``
    (:func:`kernel_tag` in brackets)."""
    return f"{name} [{kernel_tag(executor, run, targets)}]"


def built_targets(rec, events=None) -> dict:
    """Return ``{(graph, chain, kernel name): (target, ...)}``: the GPU targets each kernel was
    compiled for ahead of time (``run --target``), successful builds only, in name order; empty for a
    run without targets (``events``: the recording's events when already read, to skip the builds
    table then)."""
    if events is not None and not any(e.event == "aot_started" for e in events):
        return {}
    if not callable(getattr(rec, "kernel_builds", None)):
        return {}
    out: dict = {}
    for b in rec.kernel_builds():
        if b.status == "ok":
            out.setdefault((b.graph, b.chain, b.kernel), set()).add(b.target)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def clock_label(device: Optional[str], clock: Optional[str] = None) -> str:
    """Return what a profiled time measured: ``GPU`` only for a device clock on CUDA, else ``CPU``
    (host clock, or a CPU run): nothing is called a GPU time that a GPU did not measure."""
    if isinstance(device, str) and device.startswith("cuda") and clock == "device":
        return "GPU"
    return "CPU"
