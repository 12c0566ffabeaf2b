"""The anywidget classes: :class:`RecordingWidget` (``thundervis.api.show`` of a recording),
:class:`GroupWidget` (``thundervis.api.show`` of a group folder: the same views on one rank, a rank
picker and the rank comparison) and :class:`DiffWidget` (``thundervis.diff``).

The payload (:mod:`.data`) goes to the browser once, in the ``data`` trait; the front end
(``static/widget.js``, plain ES module shipped in the package) steps passes and switches views on
its own and asks the kernel only for what it did not get (a diff of two passes that are not
neighbours, a symbol's lineage, the diagram of one module) through custom messages
``{"id", "request": {...}}``, answered with ``{"id", "ok", "data" | "error"}``. The selection
lives in synced traits, so Python can read and set it (``w.pass_index = 3``). Where no widget
manager runs, the mimebundle's ``text/html`` (:mod:`.static_html`) shows a static rendering.
"""
from __future__ import annotations

import pathlib
import traceback
from typing import Optional

import anywidget
import traitlets

from thundervis.safe_text import encodable

from .data import DataError, RecordingData
from .group_data import GROUP_REQUESTS, GroupData
from .static_html import diff_html, recording_diffs_html, recording_html

_STATIC = pathlib.Path(__file__).parent / "static"
# The front end in parts (helpers and diff table; the recording view's frame; its Passes tab and a
# symbol's details; its Fusions and Source tabs; a kernel's asm panel; its Communication, Numerics
# and Memory tabs; a group's rank picker and Ranks tab; the diff widget and the entry point), joined
# into the one ES module anywidget loads. The parts declare functions and constants that run only
# when a view is drawn, so only the entry point's place matters: last, with the module's export.
FRONT_END_PARTS = ("common.js", "recording_view.js", "passes_view.js", "detail_view.js", "fusions_view.js",
                   "source_view.js", "asm_view.js", "comm_view.js", "numerics_view.js", "memory_view.js",
                   "group_view.js", "widget.js")


def front_end() -> str:
    """Return the widget's ES module: the shipped parts in order."""
    return "\n".join((_STATIC / part).read_text(encoding="utf-8") for part in FRONT_END_PARTS)


class _Base(anywidget.AnyWidget):
    _esm = front_end()
    _css = _STATIC / "widget.css"

    data = traitlets.Dict().tag(sync=True)

    @traitlets.validate("data")
    def _encodable_data(self, proposal) -> dict:
        """The payload as synced: lone surrogates from the recording escaped (the comm sends UTF-8)."""
        return encodable(proposal["value"])

    def _static_html(self) -> str:
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs):
        """Return the widget view plus a static ``text/html`` rendering for front ends without a
        widget manager (nbconvert, static notebook viewers)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        data, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
        data = dict(data or {})
        data["text/html"] = self._static_html()
        return (data, meta) if isinstance(bundle, tuple) else data

    def _repr_html_(self) -> str:
        """Return the static HTML rendering."""
        return self._static_html()


class RecordingWidget(_Base):
    """Graphs and chains, a pass stepper, the trace at a pass or the diff of two passes, symbol
    details and lineage, and the fusions tab (diagram and kernel table) of one recording."""

    graph = traitlets.Int(0).tag(sync=True)
    chain = traitlets.Unicode("").tag(sync=True)
    pass_index = traitlets.Int(0).tag(sync=True)
    compare_index = traitlets.Int(-1).tag(sync=True)  # -1: show the trace; else diff compare -> pass
    tab = traitlets.Unicode("passes").tag(sync=True)  # passes | fusions | source | comm | ranks (a group's widget)
    selected_uid = traitlets.Unicode("").tag(sync=True)
    selected_kernel = traitlets.Unicode("").tag(sync=True)

    def __init__(self, source: RecordingData, *, graph=None, chain=None, pass_=None, compare=None,
                 tab: str = "passes", **kwargs):
        g, c, p, cmp_ = _initial_selection(source, graph, chain, pass_, compare)
        payload = source.payload(inline={(g, c)})
        super().__init__(data=payload, graph=g, chain=c, pass_index=p, compare_index=cmp_, tab=tab, **kwargs)
        self._source = source
        self.on_msg(self._on_request)

    def _static_html(self) -> str:
        diffs = recording_diffs_html(self._source, self.data, self.graph, self.chain)
        return recording_html(self.data, self.graph, self.chain, self.pass_index, diffs, source=self._static_source())

    def _static_source(self) -> Optional[dict]:
        try:
            return self._source.source_json()
        except DataError:  # a damaged file: the static page goes without its Source section
            return None

    def request(self, request: dict) -> dict:
        """Answer one front-end request (also callable from Python): ``{"ok": True, "data": ...}``
        or ``{"ok": False, "error": one sentence}``."""
        return _answer(self._source.handle, request)

    def _on_request(self, _widget, content, _buffers) -> None:
        if not isinstance(content, dict) or "request" not in content:
            return
        reply = self.request(content["request"])
        self.send(encodable({"id": content.get("id"), **reply}))  # the comm sends UTF-8: no lone surrogate


class GroupWidget(RecordingWidget):
    """A group of rank recordings: the recording views of one rank (``rank``, synced: the browser's
    rank picker sets it, and so can Python), the group's status and ranks in ``group`` (from the
    overview: no rank's traces are read for it), and the *Ranks* tab (the comparison, computed
    when the browser first asks for it). Switching rank keeps the graph, chain and pass where the
    new rank has them; a rank that cannot be opened leaves the widget on its rank and says why in
    ``rank_error``."""

    group = traitlets.Dict().tag(sync=True)
    rank = traitlets.Int(0).tag(sync=True)
    rank_error = traitlets.Unicode("").tag(sync=True)

    def __init__(self, group: GroupData, *, rank=None, **kwargs):
        source = group.rank_data(rank)
        self._group = group
        self._loaded_rank = group.first_rank() if rank is None else int(rank)
        try:
            super().__init__(source, group=group.overview_json(), rank=self._loaded_rank, **kwargs)
        except Exception:
            source.rec.close()
            raise

    def _static_html(self) -> str:
        g = self.group
        ranks = len(g.get("ranks", []))
        traces = "identical on every rank" if g.get("identical") else f"differ ({len(g.get('variants', []))} variants)"
        note = (f"group {g.get('name')} · {g.get('status')} · {ranks} rank recordings · traces {traces}. "
                f"This static view shows rank {self.rank} only; run the notebook for the rank picker and the "
                "rank comparison (or thundervis diff --ranks GROUP).")
        diffs = recording_diffs_html(self._source, self.data, self.graph, self.chain)
        return recording_html(self.data, self.graph, self.chain, self.pass_index, diffs, note=note)

    def request(self, request: dict) -> dict:
        """Answer one front-end request: the group's (``ranks``, ``rank_diff``) or the shown rank's."""
        if isinstance(request, dict) and request.get("what") in GROUP_REQUESTS:
            return _answer(self._group.handle, request)
        return super().request(request)

    @traitlets.observe("rank")
    def _rank_changed(self, change) -> None:
        if not hasattr(self, "_group") or change["new"] == self._loaded_rank:
            return
        source = None
        try:
            source = self._group.rank_data(change["new"])
            g, c, p, cmp_ = _kept_selection(source, self.graph, self.chain, self.pass_index, self.compare_index)
            payload = source.payload(inline={(g, c)})
        except DataError as e:
            if source is not None:
                source.rec.close()
            with self.hold_sync():
                self.rank_error = str(e)
                self.rank = self._loaded_rank  # back to the rank still shown
            return
        old, old_rank = self._source, self._loaded_rank
        same_traces = self._group.fingerprint_of(old_rank) == self._group.fingerprint_of(change["new"])
        self._source, self._loaded_rank = source, change["new"]
        with self.hold_sync():
            self.data = payload
            self.graph, self.chain, self.pass_index, self.compare_index = g, c, p, cmp_
            if not same_traces:  # uids name the same symbols only where the traces are the same
                self.selected_uid = ""
            self.rank_error = ""
        old.rec.close()


class DiffWidget(_Base):
    """The diff of two passes (possibly of two recordings) or the comparison of two recordings."""

    def __init__(self, payload: dict, trace_diff=None, **kwargs):
        super().__init__(data=payload, **kwargs)
        self._trace_diff = trace_diff

    def _static_html(self) -> str:
        return diff_html(self.data, self._trace_diff)


def _answer(handle, request) -> dict:
    """Return ``{"ok": True, "data": handle(request)}``, or ``{"ok": False, "error": ...}`` (one
    sentence; with a short traceback for an unexpected failure)."""
    try:
        return {"ok": True, "data": handle(request)}
    except (DataError, KeyError, ValueError, TypeError) as e:
        return {"ok": False, "error": str(e) or type(e).__name__}
    except Exception as e:  # never let a request kill the comm; say what failed
        return {"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=3)}


def _initial_selection(source: RecordingData, graph, chain, pass_, compare):
    """Return (graph id, chain kind, pass index, compare index) of the first view
    (``present.default_view``); DataError naming the valid choices."""
    from thundervis.present.default_view import default_view
    from thundervis.present.errors import data_errors
    dv = data_errors(default_view, source.graphs(), graph, chain, pass_, compare)
    return (0, "", 0, -1) if dv is None else (dv.graph, dv.chain, dv.pass_index, dv.compare_index)


def _kept_selection(source: RecordingData, graph: int, chain: str, pass_index: int, compare_index: int):
    """Return (graph id, chain kind, pass index, compare index) in ``source`` closest to the one
    shown (``present.default_view.kept_view``)."""
    from thundervis.present.default_view import kept_view
    from thundervis.present.errors import data_errors
    dv = data_errors(kept_view, source.graphs(), graph, chain, pass_index, compare_index)
    return (0, "", 0, -1) if dv is None else (dv.graph, dv.chain, dv.pass_index, dv.compare_index)
