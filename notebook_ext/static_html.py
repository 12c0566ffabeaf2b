"""The static HTML rendering of the widgets, for front ends without a widget manager (nbconvert to
HTML, static notebook viewers): no script, every recorded string escaped, the fusion diagram as an
``<img>`` (an SVG shown as an image runs nothing).

A pass's repeated layers (the payload's ``folds``, ``present.trace_folds``) fold into a
``<details>`` element each: its summary is the fold line the other views show, and it opens
without a script.

Diffs are drawn by :mod:`thundervis.diff.render`'s HTML back end; this module only lays out the
page around them.
"""
from __future__ import annotations

import base64
from typing import Optional

from thundervis.diff.layer_folds import diff_folds
from thundervis.diff.render import HTML_STYLE, side_by_side_html
from thundervis.safe_text import html_text

from .comm_data import COMM_NOTE

STYLE = """
.tv-static { font-family: -apple-system, Segoe UI, Helvetica, Arial, sans-serif; font-size: 13px; color: #222; }
.tv-static h3 { margin: 4px 0; font-size: 15px; }
.tv-static h4 { margin: 10px 0 4px; font-size: 13px; }
.tv-static table.tv-list { border-collapse: collapse; margin: 4px 0; }
.tv-static table.tv-list td, .tv-static table.tv-list th { padding: 1px 8px; text-align: left; border-bottom: 1px solid #eee; }
.tv-static pre.tv-trace { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; background: #fafafa;
  border: 1px solid #ddd; padding: 6px; max-height: 420px; overflow: auto; }
.tv-static .tv-eager { color: #b00020; font-weight: bold; }
.tv-static .tv-muted { color: #777; }
.tv-static .tv-fellback { color: #8a3b00; }
.tv-static .tv-note-line { font-weight: 600; }
.tv-static details { margin: 4px 0; }
.tv-static details.tv-fold { margin: 0; }
.tv-static details.tv-fold > summary { list-style: none; cursor: pointer; color: #555; }
.tv-static details.tv-fold > summary::-webkit-details-marker { display: none; }
.tv-static details.tv-fold[open] > summary .tv-fold-closed,
.tv-static details.tv-fold:not([open]) > summary .tv-fold-open { display: none; }
.tv-static .tv-diagram { max-width: 100%; max-height: 600px; border: 1px solid #ddd; }
.tv-static .tv-comm { color: #b3261e; font-weight: bold; }
""" + HTML_STYLE


def _e(x) -> str:
    """Escape a recorded value for HTML, control and bidi characters made visible."""
    return html_text(x)


def _page(body: str) -> str:
    return f'<div class="tv-static"><style>{STYLE}</style>{body}</div>'


def _chain_of(payload: dict, graph: int, chain: str) -> Optional[dict]:
    for g in payload.get("graphs", []):
        if g["id"] == graph:
            for c in g["chains"]:
                if c["kind"] == chain:
                    return c
    return None


def _pass_lines(payload: dict, chain: dict, index: int) -> list:
    by_index = {p["index"]: p for p in chain["passes"]}
    p = by_index.get(index)
    held = p["same_as"] if p and p.get("same_as") is not None else index
    table = payload["lines"]
    return [table[i] if isinstance(i, int) else i for i in (chain["lines"] or {}).get(str(held), [])]


def _pass_folds(chain: dict, index: int) -> list:
    """The folds (``present.trace_folds.folds_json``) of the trace pass ``index`` of ``chain`` shows."""
    p = next((p for p in chain["passes"] if p["index"] == index), None)
    held = p["same_as"] if p and p.get("same_as") is not None else index
    return (chain.get("folds") or {}).get(str(held)) or []


def _folded(rows: list, folds: list) -> str:
    """Return the HTML lines ``rows`` joined, each fold's hidden rows in a ``<details>`` whose
    summary is its fold line (closed and open texts; CSS shows the one that fits). A fold whose
    lines are not in ``rows`` in order is left out (its rows stay shown)."""
    parts, plain, at = [], [], 0
    for f in sorted((f for f in folds if isinstance(f, dict)), key=lambda f: f.get("start", -1)):
        start, end = f.get("start"), f.get("end")
        if not (isinstance(start, int) and isinstance(end, int) and at <= start < end <= len(rows)):
            continue
        plain.extend(rows[at:start])
        if plain:  # no newline next to a <details>: a block element starts its own line
            parts.append("\n".join(plain))
            plain = []
        parts.append(f'<details class="tv-fold"><summary><span class="tv-fold-closed">{_e(f.get("line"))}</span>'
                     f'<span class="tv-fold-open">{_e(f.get("open_line"))}</span></summary>'
                     + "\n".join(rows[start:end]) + "</details>")
        at = end
    plain.extend(rows[at:])
    if plain:
        parts.append("\n".join(plain))
    return "".join(parts)


def _trace_pre(payload: dict, lines: list, folds: list = ()) -> str:
    infos = payload.get("infos", [])
    out = []
    for _uid, _depth, text, info, *_ in lines:
        title, comm = "", False
        if info is not None:
            src = infos[info].get("source")
            comm = bool(infos[info].get("comm"))
            if src:
                title = f"{src['label']}  {src['code']}" + (f"  [{src['module']}]" if src.get("module") else "")
            if comm:
                title = f"{COMM_NOTE}. {title}"
        pad = ""  # the printer's text holds its indentation
        # a communication op is marked in the text too (a class alone is lost when the page is copied)
        shown = pad + ("⇄ " if comm else "") + text
        klass = ' class="tv-comm"' if comm else ""
        out.append(f'<span{klass} title="{_e(title)}">{_e(shown)}</span>')
    return '<pre class="tv-trace">' + _folded(out, list(folds)) + "</pre>"


def _kernels_table(kernels: list) -> str:
    if not kernels:
        return '<p class="tv-muted">no kernels</p>'
    # a checked run (run --check-numerics): each kernel's verdict cell (present.numerics.verdict_cell)
    checked = any(isinstance(k.get("numerics"), dict) for k in kernels)
    rows = [f"<tr><th>kernel</th>{'<th>numerics</th>' if checked else ''}<th>chain</th><th>executor</th><th>ops</th>"
            "<th>median</th><th>roofline µs</th><th>% roof</th><th>source lines</th></tr>"]
    for k in kernels:
        cell = k.get("numerics") if isinstance(k.get("numerics"), dict) else {"text": "-", "title": ""}
        verdict = f'<td title="{_e(cell["title"])}">{_e(cell["text"])}</td>' if checked else ""
        med = k.get("median") or "-"  # present.units.format_us
        # its chain's wall time per call against its kernels (present.chain_times), on hover
        chain_time = (f' title="{_e(str(k["chain"]) + " chain: " + k["chain_time"])}"'
                      if isinstance(k.get("chain_time"), str) and k["chain_time"] else "")
        srcs = k.get("sources_cell") or ""  # present.kernel_rows: the cell every table shows
        roof, pct = k.get("roofline_text") or "-", k.get("pct_of_roofline_text") or "-"  # present.units
        executor = k["tag"] if isinstance(k.get("tag"), str) and k["tag"] else k["executor"]
        # a kernel that ran in torch at run time: present.kernel_rows status, its reason on hover
        fell = (f' <span class="tv-fellback" title="{_e(k["fallback_text"])}">⚠ {_e(k["status"])}</span>'
                if k.get("fallback") else "")
        rows.append(f"<tr><td>{_e(k['name'])}{fell}</td>{verdict}<td>{_e(k['chain'])}</td><td>{_e(executor)}</td>"
                    f"<td>{_e(k['n_ops'])}</td><td{chain_time}>{_e(med)}</td><td>{_e(roof)}</td><td>{_e(pct)}</td>"
                    f"<td>{_e(srcs)}</td></tr>")
    return '<table class="tv-list">' + "".join(rows) + "</table>"


def communication_html(comm: Optional[dict]) -> str:
    """Return the static page's *Communication* section from the payload's ``communication``
    (:func:`.comm_data.communication_json`): the collectives run between compiled graphs per place,
    in order, then the counts over the whole run; empty when the run had none."""
    if not comm:
        return ""
    counts = comm["counts"]
    parts = [f"<h4>communication · {_e(comm['header'])}</h4>"]
    if comm["in_traces"]:
        parts.append(f'<p class="tv-muted">{_e(comm["in_traces"])} communication ops in the traces '
                     f'(marked <span class="tv-comm">⇄</span>): {_e(comm["note"])}.</p>')
    if comm["places"]:
        parts.append(f'<p class="tv-muted">collectives run eagerly between compiled graphs, recorded one by one '
                     f'({_e(counts["recorded"])} of {_e(counts["between_graphs"])}):</p>')
    head = "<tr><th>#</th><th>step</th><th>op</th><th>bytes</th><th>group</th><th>issued by</th><th>source</th></tr>"
    for place in comm["places"]:
        rows = [head]
        for r in place["rows"]:
            rows.append(f"<tr><td>{_e(r['seq'])}</td><td>{_e(r['step'])}</td><td>{_e(r['op'])}</td>"
                        f"<td>{_e(r['bytes_text'])}</td>"
                        f"<td>{_e(r['group_size'] if r['group_size'] is not None else '?')}</td>"
                        f"<td>{_e(r['issued_by'])}</td><td>{_e(r['source'] or '')}</td></tr>")
        n = len(place["rows"])
        parts.append(f"<details><summary>{_e(place['where'])} · {n} collective{'' if n == 1 else 's'}</summary>"
                     f'<table class="tv-list">{"".join(rows)}</table></details>')
    if comm["by_op"] or comm["run_places"]:
        over = [f"{op}: {n} ({nbytes})" for op, n, nbytes in comm["by_op"]]
        parts.append(f'<p>over the whole run: {_e(", ".join(over))}</p>')
        if comm["run_places"]:
            parts.append('<table class="tv-list">' + "".join(f"<tr><td>{_e(t)}</td></tr>" for t in comm["run_places"])
                         + "</table>")
    return "".join(parts)


def svg_img(svg: str, alt: str) -> str:
    """Return an ``<img>`` showing ``svg`` (as a data URL: shown, never run)."""
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<img class="tv-diagram" alt="{_e(alt)}" src="data:image/svg+xml;base64,{data}">'


def source_html(view: Optional[dict]) -> str:
    """Return the Source section of the static page: the lines of ``view`` (``SourceFile.as_json()``)
    that made ops, each with its time share and every chain's note (all text escaped)."""
    if not view or not view.get("lines"):
        return ""
    rows = []
    for row in view["lines"]:
        if not row.get("ops"):
            continue
        notes = "".join(f'<div class="tv-src-note">g{_e(n["graph"])} {_e(n["text"])}</div>' for n in row["notes"])
        share = row.get("share_text") or ""  # present.units.format_share
        rows.append(f'<div class="tv-src-row tv-src-ops"><span class="tv-lno">{_e(row["line"])} </span>'
                    f'<span class="tv-src-share">{_e(share)}</span> <span class="tv-src-code">{_e(row["text"])}</span>'
                    f"</div>{notes}")
    return (f"<h4>source · {_e(view.get('label'))}</h4><p class=\"tv-muted\">{_e(view.get('summary'))}</p>"
            f'<div class="tv-source-lines">{"".join(rows)}</div>')


def numerics_html(num: Optional[dict]) -> str:
    """Return the static Numerics section (``run --check-numerics`` verdicts, worst first; empty
    when the run was not checked). Every recorded string is escaped."""
    if not num:
        return ""
    rows = ["<tr><th></th><th>verdict</th><th>kernel</th><th>chain</th><th>max rel</th><th>eager rel</th>"
            "<th>ratio</th></tr>"]
    for r in num["rows"]:
        rows.append(f"<tr><td>{_e(r['mark'])}</td><td>{_e(r['verdict'])}</td><td>{_e(r['kernel'])}</td>"
                    f"<td>g{_e(r['graph'])} {_e(r['chain'])}</td><td>{_e(r['max_rel_text'])}</td>"
                    f"<td>{_e(r['eager_rel_text'])}</td><td>{_e(r['ratio_text'])}</td></tr>")
    eager = "".join(f'<p class="tv-muted">{_e(line)}</p>' for line in num.get("eager", []))
    return f"<h4>numerics · {_e(num['header'])}</h4>{eager}" + '<table class="tv-list">' + "".join(rows) + "</table>"


def memory_html(mem: Optional[dict]) -> str:
    """Return the static *Memory* section from the payload's ``memory`` (``memory_plot.memory_tab``):
    the peak line and the timeline plot as an ``<img>``, or the "not recorded" sentence of a recording
    made before the ledger; empty for a payload without it. Text is escaped."""
    if not isinstance(mem, dict):
        return ""
    if not mem.get("recorded"):
        return f'<h4>memory</h4><p class="tv-muted">{_e(mem.get("message") or "")}</p>'
    parts = [f'<h4>memory</h4><p class="tv-mem-peak">{_e(mem.get("peak_line") or "")}</p>']
    if isinstance(mem.get("svg"), str) and mem["svg"]:
        parts.append(svg_img(mem["svg"], "live bytes over the step, forward then backward, the peak marked"))
    else:
        parts.append('<p class="tv-muted">no timeline plot: no final trace has a timeline, or matplotlib '
                     "(the 'plot' extra) is not installed</p>")
    return "".join(parts)


def recording_html(payload: dict, graph: int, chain: str, pass_index: int, diffs: Optional[dict] = None,
                   note: Optional[str] = None, source: Optional[dict] = None) -> str:
    """Return the static page of one recording: its graphs and chains (eager ones marked), the
    passes of the selected chain, the trace at the selected pass, the diff of each changed pass
    against the one before (``diffs``: ``"a:b"`` -> HTML fragment from the diff renderer), the
    kernel table, the fusion diagram, the run's communication (:func:`communication_html`) and
    memory (:func:`memory_html`).
    ``note`` (plain text) is said under the title (a group's widget says which rank this is);
    ``source``: the Source tab's view of the run's script (:func:`source_html`)."""
    parts = [f"<h3>thundervis · {_e(payload.get('title'))}</h3>",
             f'<p class="tv-muted">{_e(payload.get("path"))} · {_e((payload.get("run_status") or {}).get("label") or "")}'
             f' · static view (run the notebook for the interactive widget)</p>']
    if note:
        parts.append(f'<p class="tv-note-line">{_e(note)}</p>')
    rows = ["<tr><th>graph</th><th>chain</th><th>passes</th><th>status</th></tr>"]
    for g in payload.get("graphs", []):
        for c in g["chains"]:
            eager = (f'<span class="tv-eager">ran eagerly</span> {_e(c["eager"])}' if c.get("eager")
                     else _e(c["status"]))
            rows.append(f"<tr><td>{_e(g['id'])}</td><td>{_e(c['kind'])}</td><td>{len(c['passes'])}</td>"
                        f"<td>{eager}</td></tr>")
    parts.append('<table class="tv-list">' + "".join(rows) + "</table>")
    parts.append(communication_html(payload.get("communication")))
    parts.append(numerics_html(payload.get("numerics")))
    parts.append(memory_html(payload.get("memory")))
    c = _chain_of(payload, graph, chain)
    if c is not None and c["passes"]:
        names = {p["index"]: p["name"] for p in c["passes"]}
        plist = ["<tr><th>#</th><th>pass</th><th>time</th><th>changed</th><th>symbols</th></tr>"]
        for p in c["passes"]:
            plist.append(f"<tr><td>{_e(p['index'])}</td><td>{_e(p['name'])}</td><td>{_e(p['ms_text'])}</td>"
                         f"<td>{'yes' if p['changed'] else ''}</td><td>{_e(p['n_symbols'])}</td></tr>")
        parts.append(f"<h4>graph {_e(graph)} · {_e(chain)} · passes</h4>")
        parts.append('<table class="tv-list">' + "".join(plist) + "</table>")
        parts.append(f"<h4>trace after {_e(pass_index)} {_e(names.get(pass_index, '?'))}</h4>")
        parts.append(_trace_pre(payload, _pass_lines(payload, c, pass_index), _pass_folds(c, pass_index)))
        for key, fragment in (diffs or {}).items():
            a, b = (int(x) for x in key.split(":"))
            parts.append(f"<details><summary>diff {_e(a)} {_e(names.get(a, '?'))} → {_e(b)} "
                         f"{_e(names.get(b, '?'))}</summary>{fragment}</details>")
        g = next(g for g in payload["graphs"] if g["id"] == graph)
        parts.append(f"<h4>kernels of graph {_e(graph)}</h4>")
        parts.append(_kernels_table(g.get("kernels", [])))
        diagram = c.get("diagram")
        if diagram and diagram.get("svg"):
            parts.append(f"<h4>fusion diagram · {_e(chain)} after pass {_e(diagram.get('pass'))}</h4>")
            parts.append(svg_img(diagram["svg"], f"fusion diagram of graph {graph} {chain}"))
        elif diagram and diagram.get("error"):
            parts.append(f'<p class="tv-muted">no fusion diagram: {_e(diagram["error"])}</p>')
    parts.append(source_html(source))
    return _page("".join(parts))


def recording_diffs_html(source, payload: dict, graph: int, chain: str) -> dict:
    """Return ``{"a:b": HTML}`` for every diff the payload holds for one chain, drawn by the diff
    renderer's HTML back end (3 lines of context, repeated layers folded as ``thundervis diff``
    folds them)."""
    c = _chain_of(payload, graph, chain)
    if c is None:
        return {}
    out = {}
    for key in c["diffs"] or {}:
        a, b = (int(x) for x in key.split(":"))
        d = source.diff(graph, chain, a, b)
        out[key] = side_by_side_html(d, context=3, folds=diff_folds(d))
    return out


def diff_html(payload: dict, trace_diff=None) -> str:
    """Return the static page of a ``thundervis.diff`` widget: the diff of two passes (drawn by the
    diff renderer from ``trace_diff``) or the comparison of two recordings."""
    parts = [f"<h3>thundervis diff · {_e(payload.get('title'))}</h3>"]
    if payload.get("kind") == "passes":
        d = payload["diff"]
        parts.append(f'<p class="tv-muted">{_e(d["summary"])}</p>')
        if trace_diff is not None:
            parts.append(side_by_side_html(trace_diff, context=3, folds=diff_folds(trace_diff)))
    else:
        parts.append(f'<pre class="tv-trace">{_e(payload.get("text"))}</pre>')
    return _page("".join(parts))
