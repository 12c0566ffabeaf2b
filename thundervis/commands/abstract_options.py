"""``thundervis run --abstract [--device cuda|cpu] [--gpu LIST]``: the options (run's summary prints the answer from present.ls_view)."""
from __future__ import annotations

from thundervis.errors import UserError


def add_abstract_arguments(p) -> None:
    """Add ``--abstract``, ``--device`` and ``--gpu`` to the ``run`` parser."""
    p.add_argument("--abstract", action="store_true",
                   help="run the script on fake tensors: nothing allocated, no kernel executed; every graph "
                        "is compiled and recorded, and the fit and step time are answered per GPU")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None,
                   help="with --abstract: cuda (default): the script's own code sees a GPU "
                        "(torch.cuda.is_available() is True for it); cpu: it sees none")
    p.add_argument("--gpu", dest="abstract_gpus", metavar="LIST", default=None,
                   help="with --abstract: the GPUs to answer for, e.g. h100,h200,a100,b200 (default: h100)")


def abstract_settings(args):
    """Return the run's :class:`~thundervis.abstract_run.AbstractSettings`, or None without
    ``--abstract``. Raises UserError for an unknown GPU or ``--gpu`` without ``--abstract``."""
    from thundervis.abstract_run import AbstractSettings
    from thundervis.gpus import GPUS, UnknownGPU, gpu_for
    gpus = getattr(args, "abstract_gpus", None)
    if not getattr(args, "abstract", False):
        for given, name in ((gpus, "--gpu"), (getattr(args, "device", None), "--device")):
            if given is not None:
                raise UserError(f"{name} is for an abstract run: add --abstract (thundervis run --abstract {name} "
                                f"{given} SCRIPT).")
        return None
    keys = []
    for spec in (gpus or "h100").split(","):
        if not spec.strip():
            continue
        try:
            keys.append(gpu_for(spec).key)
        except UnknownGPU:
            raise UserError(f"--gpu: no GPU {spec.strip()!r} in the table (choices: {', '.join(GPUS)}).") from None
    if not keys:
        raise UserError(f"--gpu wants GPU names, e.g. h100,h200 (choices: {', '.join(GPUS)}).")
    return AbstractSettings(device=args.device or "cuda", gpus=tuple(dict.fromkeys(keys)))
