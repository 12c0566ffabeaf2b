"""The options the three forms of ``thundervis run`` (one process, a torchrun group, a group worker)
check the same way, in one place: thundervis/commands/run_options.py."""
from __future__ import annotations

import os
import re

import pytest

from thundervis.cli import build_parser
from thundervis.commands import run as run_command
from thundervis.commands.run import resolve_target
from thundervis.commands.run_options import check_run_options, parse_executors, shown_path, target_stem
from thundervis.errors import UserError
from thundervis.runner import default_output


def _parsed(*argv):
    args = build_parser().parse_args(["run", "--no-view", *argv])
    return args, resolve_target(args)


def test_target_stem_names_defaults_after_the_script_or_the_module():
    assert target_stem("/a/b/my_train.py", None) == "my_train"
    assert target_stem("train", None) == "train"
    assert target_stem(None, "pkg.sub.train_main") == "train_main"


def test_shown_path_is_relative_below_the_cwd_and_absolute_elsewhere(tmp_path, monkeypatch):
    (tmp_path / "inner").mkdir()
    monkeypatch.chdir(tmp_path / "inner")
    assert shown_path(str(tmp_path / "inner" / "r.tvrec")) == "r.tvrec"
    outside = str(tmp_path / "other.tvrec")
    assert shown_path(outside) == outside


def test_default_output_names_groups_with_their_suffix_and_stays_unique(tmp_path):
    first = default_output("job", directory=str(tmp_path), suffix=".tvgroup")
    assert re.fullmatch(r"job-\d{8}-\d{6}\.tvgroup", os.path.basename(first))
    os.mkdir(first)
    second = default_output("job", directory=str(tmp_path), suffix=".tvgroup")
    assert second != first and second.endswith(".tvgroup") and not os.path.exists(second)
    assert default_output("job", directory=str(tmp_path)).endswith(".tvrec")


def test_executors_are_checked_first_then_the_target_then_the_profile_numbers(tmp_path):
    missing = str(tmp_path / "nothere.py")
    args, (script, module, _) = _parsed("--executors", "warp", "--steps", "0", "--profile", missing)
    with pytest.raises(UserError, match="unknown executor 'warp'"):
        check_run_options(args, script, module)
    args, (script, module, _) = _parsed("--steps", "0", "--profile", missing)
    with pytest.raises(UserError, match="does not exist"):
        check_run_options(args, script, module)
    # A group worker leaves the target to run_target (its launcher checked it): the numbers come next.
    with pytest.raises(UserError, match="--steps must be between 1 and 1000"):
        check_run_options(args, script, module, check_target=False)


def test_valid_options_give_the_executors_and_the_profile_settings(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("x = 1\n")
    args, (s, m, rest) = _parsed("--executors", "torch", "--profile", "--steps", "3", str(script), "a")
    executors, profile = check_run_options(args, s, m)
    assert executors == ["torch"] and rest == ["a"]
    assert profile.timing and profile.steps == 3 and profile.warmup == 2
    args, (s, m, _) = _parsed(str(script))
    assert check_run_options(args, s, m) == (None, None)


def test_the_old_name_of_the_executor_parser_still_imports():
    assert run_command._executors is parse_executors
    assert parse_executors(" torch , ") == ["torch"] and parse_executors("") is None
