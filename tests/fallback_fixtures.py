"""Run-time kernel fallbacks for the core and widget tests: make the first generated Triton kernel
fail on its first launch, so the compiler runs its region in torch and records a
``kernel_fallback`` event."""
from __future__ import annotations

import thundervis.compiler.executors.triton_executor as triton_mod


def fail_first_launch(mp, error: str) -> list:
    """Patch the Triton executor through ``mp`` (a ``pytest.MonkeyPatch``) so that the first kernel
    launched raises ``ValueError(error)``; return the list that receives that kernel's name."""
    real_guarded, failed = triton_mod._guarded, []

    def guarded(launch, fusion, via):
        def failing(*args):
            if not failed:
                failed.append(fusion.sym)
                raise ValueError(error)
            return launch(*args)
        return real_guarded(failing, fusion, via)
    mp.setattr(triton_mod, "_guarded", guarded)
    return failed
