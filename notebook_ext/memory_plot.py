"""The widget's memory timeline as an SVG drawn by matplotlib (its Figure API and SVG backend: no
pyplot, no global state). Every label is ours: the series comes from ``present.memory.plot_series``,
numbers only, so no recorded string reaches the picture."""
from __future__ import annotations

import io
from typing import Optional


def timeline_svg(series: dict) -> Optional[str]:
    """Return the SVG text of ``series`` (``present.memory.plot_series``): bytes over the step,
    forward then backward, the peak marked; None when the series is empty or matplotlib is missing."""
    if not series or not series.get("bytes"):
        return None
    try:
        from matplotlib.backends.backend_svg import FigureCanvasSVG
        from matplotlib.figure import Figure
    except ImportError:  # the plot extra is not installed: the tab says so
        return None
    from thundervis.present.units import format_bytes
    mb = [b / 1e6 for b in series["bytes"]]  # decimal MB, as format_bytes words the peak
    fig = Figure(figsize=(7, 2.6))
    FigureCanvasSVG(fig)
    ax = fig.add_subplot()
    ax.plot(range(len(mb)), mb, color="#3b6ea5", linewidth=1.2, label="live bytes")
    if series.get("split") is not None:
        ax.axvline(series["split"], color="#888888", linestyle=":", linewidth=1)
        ax.text(series["split"], max(mb) * 1.02, " backward", fontsize=8, color="#555555", va="bottom")
    p = series["peak"]
    ax.plot([p], [mb[p]], marker="o", color="#c0392b", label="peak")
    ax.annotate(f"peak {format_bytes(series['peak_bytes'])} (parameters apart)", (p, mb[p]), textcoords="offset points",
                xytext=(6, -12), fontsize=8, color="#c0392b", gid="peak")
    ax.set_xlabel("symbol (forward, then backward)")
    ax.set_ylabel("MB live")
    ax.set_ylim(0, max(mb) * 1.15 or 1)
    ax.set_title(series.get("title", ""), fontsize=9)
    fig.tight_layout()
    out = io.StringIO()
    fig.savefig(out, format="svg")
    return out.getvalue()


def memory_tab(rec) -> dict:
    """Return the widget's Memory tab of recording ``rec``: {"recorded", "message", "peak_line",
    "svg"} (present.memory's words and figures; ``svg`` None when there is nothing to draw or no
    matplotlib). Raises RecordingError for damaged ledger rows."""
    from thundervis.present.memory import memory_report, peak_line, plot_series
    report = memory_report(rec)
    if not report.recorded:
        return {"recorded": False, "message": report.message, "peak_line": "", "svg": None}
    return {"recorded": True, "message": "", "peak_line": peak_line(report),
            "svg": timeline_svg(plot_series(report))}
