"""The ``nvfuser`` executor: one nvFuser FusionDefinition per fusion region.

The definition is generated as Python source by :mod:`.nvfuser_codegen` from the validated in-memory
region, recorded as the kernel's ``code`` (``language: "nvfuser"``), and, where nvFuser and CUDA
exist, built by executing that generated source in a fresh namespace and run with ``fd.execute``.
Either frontend works: ``nvfuser_direct`` is preferred, the older ``nvfuser`` package is the fallback.
Without nvFuser or CUDA the executor is unavailable and says why in one sentence.
"""
from __future__ import annotations

import functools
from typing import Callable, Optional

from ..ir import BoundSymbol, TensorProxy, flatten
from .base import BuiltKernel, FusionExecutor, KernelBuildError, register_executor
from .nvfuser_codegen import (FusionProgram, NvFuserLoweringError, generate_definition, load_definition,
                              lowering_problem)


@functools.lru_cache(maxsize=1)
def nvfuser_frontend():
    """Return ``(module name, FusionDefinition, DataType)`` of the importable nvFuser frontend, or
    ``(None, reason)`` as a 2-tuple when there is none."""
    reasons = []
    for mod in ("nvfuser_direct", "nvfuser"):
        try:
            m = __import__(mod)
            return mod, m.FusionDefinition, m.DataType
        except Exception as e:  # ImportError, or a broken install raising anything at import
            reasons.append(f"{mod}: {type(e).__name__}")
    return None, "nvFuser is not installed (neither nvfuser_direct nor nvfuser imports)"


def nvfuser_unavailable_reason() -> Optional[str]:
    """Return None when nvFuser and a CUDA device are usable here, else one sentence saying why not."""
    import torch
    cuda = torch.cuda.is_available()
    found = nvfuser_frontend()
    if found[0] is None and not cuda:
        return "nvfuser needs nvFuser and a CUDA device; this machine has neither."
    if found[0] is None:
        return f"{found[1]}."
    if not cuda:
        return "nvfuser needs a CUDA device and this machine has none."
    return None


class NvFuserKernel:
    """A built definition: calling it with the region's tensor inputs returns the outputs.

    The definition is specialized to its inputs' strides (nvFuser's contiguity/stride_order); when a
    call passes tensors with other strides, a definition for those strides is generated from the same
    in-memory region and cached next to the first one.
    """

    def __init__(self, fusion: BoundSymbol, program: FusionProgram):
        self.fusion = fusion
        self.program = program
        self._by_strides: dict = {}
        _, self._FusionDefinition, self._DataType = nvfuser_frontend()
        key = tuple(p.strides for p in program.inputs)
        self._by_strides[key] = self._build(program)

    def _build(self, program: FusionProgram):
        define = load_definition(program, {"DataType": self._DataType,
                                           "FusionDefinition": self._FusionDefinition})
        with self._FusionDefinition() as fd:
            define(fd)
        return fd

    def __call__(self, *args):
        tensors = [a for a in args if hasattr(a, "stride")]
        key = tuple(tuple(t.stride()) for t in tensors)
        fd = self._by_strides.get(key)
        if fd is None:
            strides = {p.name: s for p, s in zip(self.program.inputs, key)}
            fd = self._by_strides[key] = self._build(generate_definition(self.fusion, strides))
        outs = fd.execute(tensors)
        by_name = dict(zip((p.name for p in dict.fromkeys(self.program.outputs)), outs))
        return tuple(by_name[p.name] for p in self.program.outputs)


class NvFuserExecutor(FusionExecutor):
    """Fuses regions of CUDA prims into nvFuser definitions (see the module docstring)."""

    name = "nvfuser"
    language = "nvfuser"

    def __init__(self):
        self._programs: dict[str, FusionProgram] = {}

    def available(self) -> Optional[str]:
        return nvfuser_unavailable_reason()

    def prim_problem(self, b: BoundSymbol) -> Optional[str]:
        """Return why prim ``b`` has no nvFuser lowering (op, dtype, device, arguments), or None;
        independent of whether nvFuser is installed here."""
        if b.fusion:
            return None
        return lowering_problem(b)

    def region_problem(self, members: list[BoundSymbol], outputs=None) -> Optional[str]:
        return self.first_member_problem(members)

    def program_for(self, fusion: BoundSymbol) -> FusionProgram:
        """Return the generated definition of ``fusion`` (cached per uid and name)."""
        key = f"{fusion.uid}:{fusion.sym}"
        prog = self._programs.get(key)
        if prog is None or prog.inputs != tuple(dict.fromkeys(fusion.flat_inputs())):
            try:
                prog = generate_definition(fusion)
            except NvFuserLoweringError as e:
                raise KernelBuildError(f"nvfuser: {e}") from None
            self._programs[key] = prog
        return prog

    def build_kernel(self, fusion: BoundSymbol) -> BuiltKernel:
        """Generate the definition (text only: no nvFuser needed)."""
        prog = self.program_for(fusion)
        note = None if self.available() is None else f"not built here: {self.available()}"
        return BuiltKernel(prog.source, self.language, note)

    def callable_for(self, b: BoundSymbol) -> Callable:
        """Return the launcher of fusion ``b``: builds its FusionDefinition from the generated source
        and runs it with ``fd.execute``. A single claimed prim runs as a one-member region."""
        reason = self.available()
        if reason is not None:
            raise KernelBuildError(f"nvfuser: {reason}")
        if not b.fusion:
            b = BoundSymbol(sym=f"nvfuser_single_{b.uid}", args=tuple(dict.fromkeys(b.flat_inputs())),
                            kwargs={}, outputs=b.outputs if isinstance(b.outputs, tuple) else (b.outputs,),
                            uid=b.uid, origin=(b.uid,), subsymbols=(b,), executor=self.name, fusion=True)
            kernel = NvFuserKernel(b, self.program_for(b))
            return functools.partial(_run_single, b.subsymbols[0], kernel)
        return NvFuserKernel(b, self.program_for(b))


def _run_single(prim: BoundSymbol, kernel: NvFuserKernel, *args, **kwargs):
    """Run a one-prim region with the prim's own call arguments (scalars are in the definition)."""
    proxies = flatten((prim.args, tuple(prim.kwargs.values())))
    values = flatten((args, tuple(kwargs.get(k) for k in prim.kwargs)))
    tensors = {}
    for p, v in zip(proxies, values):
        if isinstance(p, TensorProxy):
            tensors.setdefault(p.name, v)
    return kernel(*tensors.values())[0]


register_executor("nvfuser", NvFuserExecutor)
