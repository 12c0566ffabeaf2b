"""One plural rule (present/units.plural) for every count a view prints: no "1 ops", no "1 more
reasons" (issue 40); and the text ``ls`` shows a graph-break reason whole, indented."""
from __future__ import annotations

import re
from pathlib import Path

from thundervis.commands.ls import fallback_lines
from thundervis.present.units import plural, plural_word

ROOT = Path(__file__).resolve().parents[2]


def test_plural_agrees_with_the_number():
    assert [plural(n, "op") for n in (0, 1, 2)] == ["0 ops", "1 op", "2 ops"]
    assert plural(1, "pass", "passes") == "1 pass" and plural(3, "pass", "passes") == "3 passes"
    assert plural(1, "more reason") == "1 more reason" and plural_word(2, "symbol") == "symbols"


def _torch_op(reason):
    return {"kind": "torch op", "graph": 0, "chain": "forward", "what": "sort", "reason": reason,
            "source": "m.py:3", "uid": "f1"}


def test_fallback_lines_count_one_op_and_one_more_reason():
    d = {"eager_head": "0 of 1 chains ran eagerly", "chains_eager": 0, "chains_total": 1,
         "fallbacks": [_torch_op("not lowered: sort")]}
    lines = fallback_lines(d)
    assert "1 op run by torch (why not lowered / not fused):" in lines
    d["fallbacks"].append(_torch_op("not lowered: topk"))
    assert any(line.startswith("  ... and 1 more reason (") for line in fallback_lines(d, ops_limit=1))


# A count right before a plural noun in an f-string, written without the helper.
_HAND_PLURAL = re.compile(r"\{[^{}]*\} (more )?(ops|reasons|kernels|calls|passes|symbols|collectives)\b")


def test_no_count_is_pluralised_by_hand_in_the_views():
    offenders = []
    for folder in ("thundervis/commands", "thundervis/present", "thundervis/diff", "tui", "notebook_ext"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if _HAND_PLURAL.search(line) and "plural" not in line:
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    # a few say "N of M kernels" or count what is always several; list them here when you add one
    allowed = ("of {chains_total} chains", "{len(names)} kernels (", "{n} symbols: pick a module",
               "({n} symbols, forward then backward)")  # a step's timeline: always several
    assert [o for o in offenders if not any(a in o for a in allowed)] == []


def test_ls_text_shows_the_whole_graph_break_reason(tmp_path, capsys):
    from core_helpers import run_cli, write_script
    script = write_script(tmp_path, "gb.py", """
        import torch

        def f(x):
            y = torch.sin(x)
            print("break")
            return torch.cos(y) + 1
        torch.compile(f)(torch.randn(3))
    """, with_model=False)
    out = tmp_path / "gb.tvrec"
    assert run_cli(capsys, "run", "--no-view", "--executors", "torch", "-o", out, script)[0] == 0
    text = run_cli(capsys, "ls", "--brief", out)[1]
    import json
    reason = json.loads(run_cli(capsys, "ls", "--json", out)[1])["graphs"][0]["graph_break_reason"]
    rest = [ln.strip() for ln in reason.splitlines()[1:] if ln.strip()]
    assert len(rest) >= 2  # Dynamo's explanation and hints
    for ln in rest:
        assert f"         {ln}" in text.replace("          ", "         "), ln
