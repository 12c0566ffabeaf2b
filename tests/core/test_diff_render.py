"""Renderings of a diff: plain, Rich (unified Text, side-by-side Table) and HTML (escaped)."""
from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from test_diff_fixtures import pass_pair
from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace, kernel_name
from thundervis.diff import diff_traces
from thundervis.diff.render import (html_page, side_by_side_html, side_by_side_rich, unified_html, unified_plain,
                                    unified_rich, unified_rows)


def _evil_traces():
    """Two traces whose symbol names, constants and source code text hold HTML."""
    x = TensorProxy("x", (2,), "float32", "cpu")
    y = TensorProxy("t1", (2,), "float32", "cpu")
    src = SourceInfo("<script>alert(1)</script>.py", 7, "y = f('<script>alert(1)</script>')", "m<b>")
    a = BoundSymbol("prims.add", (x, "<script>alert('a')</script>"), {}, y, "f0", source=src)
    b = a.replace(args=(x, "<script>alert('b')</script>"))
    mk = lambda s: Trace("forward", (x,), (s,), (y,), pass_name="<img src=x onerror=alert(1)>")
    return mk(a), mk(b)


def test_html_escapes_every_string():
    a, b = _evil_traces()
    d = diff_traces(a, b)
    for out in (unified_html(d), side_by_side_html(d), html_page(unified_html(d), "<script>t</script>")):
        assert "<script>" not in out and "<img" not in out
        assert "&lt;script&gt;" in out
    # the source code text (a tooltip on each row) is escaped, quotes included
    assert "y = f(&#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27;)" in unified_html(d)
    assert "[m&lt;b&gt;]" in side_by_side_html(d)
    page = html_page(side_by_side_html(d), "title")
    assert page.startswith("<!doctype html>") and '<span class="hl-a">' in page


def test_unified_plain_and_rich_agree():
    # remat off: under auto the partitioner has CSEd the graph, so our cse pass changes no row
    d = diff_traces(*pass_pair("forward", "decompose", "cse", remat="off"))
    plain = unified_plain(d)
    rich = unified_rich(d)
    assert isinstance(rich, Text)
    assert [l.split("→")[0].rstrip() for l in plain.splitlines()] == \
        [l.split("→")[0].rstrip() for l in rich.plain.splitlines()]
    # changed rows carry highlighted spans
    assert any(r.spans for r in unified_rows(d) if r.status == "changed")


def test_side_by_side_rich_table_and_context_folding():
    d = diff_traces(*pass_pair("forward", "liveness", "codegen"))
    assert not d.changed
    rows = unified_rows(d, context=2)
    assert len(rows) == 1 and rows[0].status == "fold"
    d2 = diff_traces(*pass_pair("forward", "claim", "fuse"))
    table = side_by_side_rich(d2, context=1)
    assert isinstance(table, Table) and len(table.columns) == 3
    buf = io.StringIO()
    Console(file=buf, width=160, no_color=True).print(table)
    assert kernel_name(0, "forward", 0) in buf.getvalue() and "fused into" in buf.getvalue()
