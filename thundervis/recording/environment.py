"""What a recording's run row says about where it ran: versions of Python, torch, Triton and
thundervis, and the device (the writer's; torch is imported only if the run has it)."""
from __future__ import annotations


def versions() -> dict:
    """Return the versions of python, torch, triton and thundervis (None where unknown). torch's is
    the imported module's when it is imported (a run), else the installed package's: ``thundervis
    --version`` answers without the seconds an ``import torch`` takes."""
    import platform
    import sys
    from importlib.metadata import version
    out = {"python": platform.python_version(), "torch": None, "triton": None, "thundervis": None}
    torch = sys.modules.get("torch")
    try:
        out["torch"] = torch.__version__ if torch is not None else version("torch")
    except Exception:
        pass
    try:
        out["triton"] = version("triton")
    except Exception:
        pass
    from thundervis._version import __version__
    out["thundervis"] = __version__
    return out


def device_name() -> str:
    """Return the CUDA device's name, or ``cpu``."""
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:
        pass
    return "cpu"
