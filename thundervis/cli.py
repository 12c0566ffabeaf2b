"""The ``thundervis`` command line.

Each subcommand lives in its own module under :mod:`thundervis.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a callable taking the parsed
arguments and returning the exit code. Errors meant for the user are raised as :class:`UserError`
and printed as one sentence with exit code 2, never as a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from typing import Optional, Sequence

from thundervis.errors import UserError  # noqa: F401  (raised by commands; printed here)
from thundervis.safe_text import visible_line


class ExactOptionParser(argparse.ArgumentParser):
    """An ArgumentParser that takes its options only as spelled in full (``allow_abbrev=False``):
    a prefix such as a script's ``--start`` must never be read as ``--start-method``. Subparsers
    are made with the parser's own class, so every parser of the CLI is one of these."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand module registered (no parser of it takes
    an abbreviated option)."""
    parser = ExactOptionParser(
        prog="thundervis",
        description="Compile PyTorch training scripts through a recording compiler and inspect what it did.",
    )
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="print the versions of thundervis, Python, torch and Triton and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    import thundervis.commands as commands
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"thundervis.commands.{info.name}")
        register = getattr(mod, "register", None)
        if register is not None:
            register(sub)
    return parser


def version_line() -> str:
    """Return ``thundervis 0.1.0 (Python 3.11.9, torch 2.13.0+cpu, triton 3.9.0)``: what a bug
    report needs (the installed packages' versions; nothing is imported)."""
    from thundervis.recording.environment import versions
    v = versions()
    parts = [f"Python {v['python']}"] + [f"{name} {v[name]}" for name in ("torch", "triton") if v[name]]
    return f"thundervis {v['thundervis']} ({', '.join(parts)})"


class _VersionAction(argparse.Action):
    """``--version``: prints :func:`version_line` and exits 0 (looked up only when asked for)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit(0)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows up here for output still buffered
        return code
    except UserError as e:
        # Messages quote names from recordings: control characters made visible, on one line.
        print(f"thundervis: {visible_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("thundervis: interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `thundervis diff ... | head`: the reader went away; stop quietly, like git (exit 141 =
        # 128 + SIGPIPE). Point stdout at /dev/null so the interpreter's final flush is quiet too.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 141
    except Exception as e:
        # A damaged recording found by any command, wherever it is read: one sentence, exit 2.
        from thundervis.recording import RecordingError
        if not isinstance(e, RecordingError):
            raise
        print(f"thundervis: {visible_line(str(e).rstrip('.'))}.", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
