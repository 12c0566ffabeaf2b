"""torchrun's options on ``thundervis run`` (no subcommand of its own).

``thundervis run --nproc-per-node N [--nnodes ... --rdzv-endpoint ...] SCRIPT ARGS`` launches SCRIPT
through ``torch.distributed.run`` (torchrun) with every worker recorded (see
:mod:`thundervis.distributed`). The options are torchrun's own, spelled as torchrun spells them
(dashes or underscores); they are parsed here only to be handed back to torchrun's parser, which
validates them, so this module never imports torch (``thundervis --help`` stays torch-free).
"""
from __future__ import annotations

import argparse

# (option names, takes a value). torchrun's -m / --no-python / --run-path are not offered: the
# worker is always thundervis's, and thundervis run has its own -m for the user's module.
TORCHRUN_OPTIONS: tuple[tuple[tuple[str, ...], bool], ...] = (
    (("--nproc-per-node", "--nproc_per_node"), True),
    (("--nnodes",), True),
    (("--node-rank", "--node_rank"), True),
    (("--rdzv-backend", "--rdzv_backend"), True),
    (("--rdzv-endpoint", "--rdzv_endpoint"), True),
    (("--rdzv-id", "--rdzv_id"), True),
    (("--rdzv-conf", "--rdzv_conf"), True),
    (("--standalone",), False),
    (("--max-restarts", "--max_restarts"), True),
    (("--monitor-interval", "--monitor_interval"), True),
    (("--start-method", "--start_method"), True),
    (("--role",), True),
    (("--log-dir", "--log_dir"), True),
    (("--redirects",), True),
    (("--tee",), True),
    (("--local-ranks-filter", "--local_ranks_filter"), True),
    (("--master-addr", "--master_addr"), True),
    (("--master-port", "--master_port"), True),
    (("--local-addr", "--local_addr"), True),
)


def _dest(names: tuple[str, ...]) -> str:
    return "torchrun_" + names[0].lstrip("-").replace("-", "_")


def add_torchrun_arguments(p: argparse.ArgumentParser) -> None:
    """Add torchrun's options (see :data:`TORCHRUN_OPTIONS`) to the ``run`` parser."""
    g = p.add_argument_group(
        "multi-process (torchrun)",
        "with any of these the script runs under torch.distributed.run, one recording per rank in a "
        "group folder (--out names the folder)")
    for names, value in TORCHRUN_OPTIONS:
        if value:
            g.add_argument(*names, dest=_dest(names), default=None, metavar="X",
                           help=argparse.SUPPRESS if names[0] != "--nproc-per-node" else
                           "worker processes per node (torchrun's; also --nnodes, --node-rank, "
                           "--rdzv-backend, --rdzv-endpoint, --rdzv-id, --rdzv-conf, --standalone, "
                           "--max-restarts, --master-addr, --master-port ... as torchrun has them)")
        else:
            g.add_argument(*names, dest=_dest(names), action="store_true", help=argparse.SUPPRESS)


def torchrun_argv(args) -> list[str]:
    """Return the torchrun options given on the command line, as torchrun's argv."""
    out: list[str] = []
    for names, value in TORCHRUN_OPTIONS:
        v = getattr(args, _dest(names), None)
        if value and v is not None:
            out += [names[0], str(v)]
        elif not value and v:
            out.append(names[0])
    return out


def distributed_requested(args) -> bool:
    """Return True when any torchrun option was given (the run goes through torchrun)."""
    return bool(torchrun_argv(args))


def torchrun_option(args, name: str):
    """Return the value given for torchrun option ``name`` (``nnodes``, ``node_rank`` ...) or None."""
    return getattr(args, "torchrun_" + name, None)
