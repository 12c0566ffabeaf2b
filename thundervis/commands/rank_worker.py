"""The entry point of each torchrun worker: ``python -m thundervis.commands.rank_worker --group DIR
-- RUN-ARGS``.

RUN-ARGS are ``thundervis run``'s own arguments (executors, GPU targets, profiling, the target and
its arguments), parsed by the ``run`` parser. The worker records into ``DIR/rank-NNNNN.tvrec``
(``RANK`` from torchrun's environment; ``-restartK`` appended after an elastic restart) and notes
its place in the job (rank, local rank, world size, node, restart) as a ``distributed`` event. It
exits with the script's exit code, so torchrun sees failures as it would without thundervis.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from thundervis.errors import UserError

ENV_FACTS = (("rank", "RANK"), ("local_rank", "LOCAL_RANK"), ("world_size", "WORLD_SIZE"),
             ("local_world_size", "LOCAL_WORLD_SIZE"), ("node_rank", "GROUP_RANK"),
             ("role", "ROLE_NAME"), ("restart", "TORCHELASTIC_RESTART_COUNT"),
             ("master_addr", "MASTER_ADDR"), ("master_port", "MASTER_PORT"),
             ("run_id", "TORCHELASTIC_RUN_ID"))


def rank_facts(environ=os.environ) -> dict:
    """Return this worker's place in the job from torchrun's environment variables (ints where
    they are numbers; absent variables left out)."""
    facts = {}
    for key, var in ENV_FACTS:
        v = environ.get(var)
        if v is None:
            continue
        facts[key] = int(v) if v.lstrip("-").isdigit() else v
    return facts


def rank_file_name(rank: int, restart: int = 0) -> str:
    """Return the file name of a rank's recording in its group folder."""
    return f"rank-{rank:05d}.tvrec" if not restart else f"rank-{rank:05d}-restart{restart}.tvrec"


def run_parser() -> argparse.ArgumentParser:
    """Return a parser holding only ``thundervis run`` (what the worker parses; building the CLI's
    whole parser would import every command, the CLI among them, which imports this one)."""
    from thundervis.commands import run
    parser = argparse.ArgumentParser(prog="thundervis")
    run.register(parser.add_subparsers(dest="command", metavar="COMMAND"))
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one worker: parse, record the user's script into the group folder, return its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 3 or argv[0] != "--group" or argv[2] != "--":
        print("thundervis: usage: python -m thundervis.commands.rank_worker --group DIR -- RUN-ARGS",
              file=sys.stderr)
        return 2
    group, run_args = argv[1], argv[3:]
    facts = rank_facts()
    if "rank" not in facts:
        print("thundervis: the worker runs under torchrun (RANK is not set); use "
              "thundervis run --nproc-per-node N SCRIPT.", file=sys.stderr)
        return 2
    from thundervis import runner
    from thundervis.commands.run import resolve_target
    from thundervis.commands.run_options import check_run_options, parse_target_option
    try:
        args = run_parser().parse_args(["run", "--no-view", *run_args])
        script, module, script_args = resolve_target(args)
        executors, profile = check_run_options(args, script, module, check_target=False)
        targets = parse_target_option(getattr(args, "gpu_targets", None))
        out = runner.check_output(os.path.join(group, rank_file_name(facts["rank"], facts.get("restart", 0))))
    except UserError as e:
        print(f"thundervis: rank {facts['rank']}: {e}", file=sys.stderr)
        return 2
    result = runner.run_target(script=script, module=module, args=script_args, out=out,
                               executors=executors, debug=args.debug, profile=profile,
                               notes=[("distributed", facts)], targets=targets, remat=args.remat)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
