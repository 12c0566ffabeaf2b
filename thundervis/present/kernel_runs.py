"""What ran each kernel, where: the one rule every view uses to say it.

A Triton fusion's kernel is generated (and, with ``--target``, compiled) for a GPU, but what runs
it depends on the machine: a compiled Triton kernel on a GPU, Triton's interpreter, or, without
CUDA and with the default executors, the fast CPU path (the region's ATen ops through torch, or
the region compiled by Inductor), chosen by measuring at its first call. The compiler reports each
choice as a ``kernel_path`` event (at build time, then again with its measured times); a kernel that
fell back at run time (``kernel_fallback``) ran through torch. :func:`kernel_runs` reads them,
:func:`ran_on_text` and :func:`kernel_label` say them: ``fw_fusion_3 [triton · ran on cpu via torch]``,
``fw_fusion_3 [triton sm_90 · ran on cpu via torch]`` once the kernel has a build for sm_90.
:func:`clock_label` names what a profiled time measured, so a CPU time never reads as a GPU time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

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

    def as_json(self) -> dict:
        """Return the ``ran_on`` object of ``ls --json``: device, via, measured, torch_us,
        inductor_us, why and ``text`` (what views print)."""
        return {"device": self.device, "via": self.via, "measured": self.measured, "torch_us": self.torch_us,
                "inductor_us": self.inductor_us, "why": self.why, "fell_back": self.fell_back,
                "text": ran_on_text(self)}


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
                     _number(data.get("inductor_us")), " ".join(why.split())[:300] if isinstance(why, str) else "")


def kernel_runs(rec) -> dict:
    """Return {(graph, chain, kernel name): KernelRun} for a recording (a reader ``Recording``):
    the last ``kernel_path`` event of each kernel, and torch for a kernel whose Triton launch
    failed at run time. Kernels with neither (older recordings, other executors) are absent."""
    out: dict = {}
    for e in rec.events("kernel_path"):
        run = run_from_event(e.data)
        if run is not None:
            key = (e.graph, e.chain, e.data["kernel"])
            if run.measured or not (key in out and out[key].measured):
                out[key] = run
    for e in rec.events("kernel_fallback"):
        data = e.data if isinstance(e.data, dict) else {}
        if isinstance(data.get("kernel"), str):
            key = (e.graph, e.chain, data["kernel"])
            device = out[key].device if key in out else "unknown"
            error = " ".join(str(data.get("error") or "").split())[:300]
            out[key] = KernelRun(device, "torch", True, why=f"fell back at run time: {error}", fell_back=True)
    return out


def ran_on_text(run: Optional[KernelRun]) -> str:
    """Return ``ran on cpu via torch`` (``runs on ...`` for a plan never run, ``... after its kernel
    failed`` for a run-time fallback; "" for None)."""
    if run is None:
        return ""
    verb = "ran on" if run.measured else "runs on"
    return f"{verb} {run.device} via {run.via}" + (" after its kernel failed" if run.fell_back else "")


def kernel_label(name: str, executor: str, run: Optional[KernelRun] = None, targets: Iterable[str] = ()) -> str:
    """Return how views name a kernel: ``fw_fusion_3 [triton sm_90 · ran on cpu via torch]``
    (``targets``: the GPU archs it was compiled for; ``run``: how it ran, see :func:`kernel_runs`)."""
    head = " ".join([executor, *targets])
    where = ran_on_text(run)
    return f"{name} [{head}{' · ' + where if where else ''}]"


def clock_label(device: Optional[str], clock: Optional[str] = None) -> str:
    """Return what a profiled time measured: ``GPU`` only for a device clock on CUDA, else ``CPU``
    (host clock, or a CPU run): nothing is called a GPU time that a GPU did not measure."""
    if isinstance(device, str) and device.startswith("cuda") and clock == "device":
        return "GPU"
    return "CPU"
