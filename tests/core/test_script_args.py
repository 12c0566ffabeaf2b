"""Everything after the script (or ``-m MODULE``) is the script's, byte for byte, like ``python``
and torchrun: no option of ours or of torchrun, spelled in full or abbreviated, is taken from it
(issue 40: nanoGPT's ``sample.py --start=...`` stopped with "ambiguous option")."""
from __future__ import annotations

import argparse
import json

from thundervis.cli import build_parser
from thundervis.commands.run import resolve_target
from thundervis.commands.torchrun_options import distributed_requested

from core_helpers import run_cli, write_script


def _parsers(parser: argparse.ArgumentParser):
    """Yield ``parser`` and every subparser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def _run_parser() -> argparse.ArgumentParser:
    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def _option_names() -> set[str]:
    """Every option string of ``thundervis run`` (torchrun's as we offer them included), of the
    top-level parser, and of torchrun's own parser."""
    from torch.distributed.run import get_args_parser
    names = set(_run_parser()._option_string_actions) | set(build_parser()._option_string_actions)
    names |= set(get_args_parser()._option_string_actions)
    return names


def _spellings(name: str) -> list[str]:
    """The name in full and several prefixes of it, each bare and with ``=value``."""
    if not name.startswith("--"):
        forms = [name, name + "x"]  # -o, -ox (a short option glued to its value)
    else:
        body = name[2:]
        cuts = sorted({1, 2, max(1, len(body) // 2), max(1, len(body) - 1), len(body)})
        forms = ["--" + body[:n] for n in cuts]
    return forms + [f + "=v" for f in forms]


def test_every_parser_of_the_cli_takes_options_only_in_full():
    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 10  # the subcommands are there
    assert all(p.allow_abbrev is False for p in parsers), [p.prog for p in parsers if p.allow_abbrev]


def test_the_option_list_is_collected_not_hand_written():
    names = _option_names()
    # ours, torchrun's as we offer them, and torchrun's own (which we never offer: --no-python)
    assert {"--out", "-o", "--executors", "--no-view", "--start-method", "--start_method",
            "--nproc-per-node", "--master-addr", "--log-dir", "--no-python", "--help"} <= names


def test_any_option_name_after_the_script_is_the_scripts():
    spellings = sorted({s for n in _option_names() for s in _spellings(n)})
    assert len(spellings) > 300
    parser = build_parser()
    for flag in spellings:
        for after in ([], ["v"], ["--", "v"]):
            argv = [flag, *after]
            args = parser.parse_args(["run", "--no-view", "-o", "r.tvrec", "train.py", *argv])
            assert resolve_target(args) == ("train.py", None, argv), flag
            assert args.out == "r.tvrec" and args.no_view and not distributed_requested(args), flag
            args = parser.parse_args(["run", "-o", "r.tvrec", "-m", "pkg.mod", *argv])
            assert resolve_target(args) == (None, "pkg.mod", argv), flag
            assert args.out == "r.tvrec" and not args.no_view and not distributed_requested(args), flag


def test_a_separator_before_the_script_is_ours_and_after_it_the_scripts():
    parser = build_parser()
    args = parser.parse_args(["run", "--", "train.py", "--", "--no-view", "-o"])
    assert resolve_target(args) == ("train.py", None, ["--", "--no-view", "-o"]) and not args.no_view
    args = parser.parse_args(["run", "train.py", "--no-view"])
    assert resolve_target(args) == ("train.py", None, ["--no-view"]) and not args.no_view


def test_the_script_receives_exactly_its_argv(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = write_script(tmp_path, "sample.py", """
        import json, sys
        json.dump(sys.argv, open("argv.json", "w"))
    """, with_model=False)
    flags = sorted({s for n in _option_names() for s in _spellings(n)})
    argv = ["--start=FILE:prompt.txt", "--max_new_tokens=5", *flags, "--", "-o", "x y", ""]
    code, _, err = run_cli(capsys, "run", "--no-view", "--executors", "torch", "-o", "r.tvrec", script, *argv)
    assert code == 0, err
    assert json.loads((tmp_path / "argv.json").read_text()) == [script, *argv]
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "sample.py").write_text((tmp_path / "sample.py").read_text())
    code, _, err = run_cli(capsys, "run", "--no-view", "-o", "m.tvrec", "-m", "pkg.sample", *argv)
    assert code == 0, err
    assert json.loads((tmp_path / "argv.json").read_text())[1:] == argv
