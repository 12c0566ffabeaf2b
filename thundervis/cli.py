"""The ``thundervis`` command line.

Each subcommand lives in its own module under :mod:`thundervis.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a callable taking the parsed
arguments and returning the exit code. Errors meant for the user are raised as :class:`UserError`
and printed as one sentence with exit code 2, never as a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import Optional, Sequence

from thundervis.errors import UserError  # noqa: F401  (raised by commands; printed here)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand module registered."""
    parser = argparse.ArgumentParser(
        prog="thundervis",
        description="Compile PyTorch training scripts through a recording compiler and inspect what it did.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    import thundervis.commands as commands
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"thundervis.commands.{info.name}")
        register = getattr(mod, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as e:
        print(f"thundervis: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
