"""The code Dynamo left to run eagerly, as every view says it.

Two kinds of record say that code was not compiled although its function was: a graph break
(``dynamo_graph_break`` events, :mod:`thundervis.dynamo_breaks`: the call Dynamo could not trace
ran eagerly as a whole, and when Dynamo could not resume, the rest of the function too) and a
function Dynamo could not trace at all (``dynamo_frame_failed``). :func:`eager_regions` reads both
into :class:`EagerRegion` rows with their one wording, e.g.
``model.py:50 LSTM ran eagerly (Dynamo does not support RNN, GRU, or LSTM: torch._dynamo.config.allow_rnn=True)``,
and :func:`eager_head` the summary's count, so no front end words or counts them itself.
Recorded fields are untrusted: each is type-checked and capped here; views still make text
terminal-safe or escape it.
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, replace
from typing import Optional

from .status import dynamo_reason

GRAPH_BREAK = "graph break"
NOT_TRACED = "not traced"
EVENTS = ("dynamo_graph_break", "dynamo_frame_failed", "dynamo_raised")
_SETTING = re.compile(r"`?(torch\._dynamo\.config\.\w+)\s*=\s*(\w+)`?")


@dataclass(frozen=True)
class EagerRegion:
    """One piece of user code that ran eagerly. ``file``/``line``/``last_line``: the lines
    (``last_line`` past ``line`` when the rest of a function ran eagerly); ``code``: the first
    line's text; ``module``: the ``nn.Module`` class that ran eagerly (None when not one);
    ``function``: the compiled function it is in; ``resumed``: whether Dynamo compiled the code
    after it; ``why``: Dynamo's explanation; ``setting``: the config its hint names
    (``torch._dynamo.config.allow_rnn=True``) or None; ``reason``: Dynamo's full text; ``stopped_at``:
    where inside the call Dynamo stopped (``transformer.py:1245``) or None; ``text``: the wording;
    ``where``: its place and what ran, the wording before "ran eagerly" (``model.py:50 LSTM``)."""

    kind: str
    file: Optional[str]
    line: Optional[int]
    last_line: Optional[int]
    code: str
    module: Optional[str]
    function: Optional[str]
    resumed: bool
    why: str
    setting: Optional[str]
    reason: str
    stopped_at: Optional[str]
    text: str
    where: str = ""

    def as_json(self) -> dict:
        """Return the region as a JSON-ready dict (its fields)."""
        return asdict(self)

    def covers(self, file: str, line: int) -> bool:
        """Return whether the region's lines include ``line`` of ``file`` (compared by path, or by
        base name when either side is only a name)."""
        if self.file is None or self.line is None:
            return False
        same = self.file == file or (os.path.basename(self.file) == os.path.basename(file)
                                     and (os.sep not in self.file or os.sep not in file))
        return same and self.line <= line <= (self.last_line or self.line)


def _str(v, limit: int = 2000) -> Optional[str]:
    return v[:limit] if isinstance(v, str) and v else None


def _int(v) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def explain(reason: str) -> tuple[str, Optional[str]]:
    """Return (Dynamo's explanation, the config setting its hints name or None) of a Dynamo
    failure text; the first line stands in for a missing explanation."""
    lines = [" ".join(x.split()) for x in reason.splitlines() if x.strip()]
    why = next((x[len("Explanation:"):].strip() for x in lines if x.startswith("Explanation:")), "")
    if not why:
        body = [x for x in lines if not x.startswith(("Encountered graph break", "Compiling up to"))]
        why = body[0] if body else "Dynamo could not trace it"
    hints = " ".join(x for x in lines if x.startswith("Hint:"))
    m = _SETTING.search(hints)
    return why.rstrip("."), (f"{m.group(1)}={m.group(2)}" if m else None)


def place(file: Optional[str], line: Optional[int], last_line: Optional[int], what: str, resumed: bool,
          function: Optional[str]) -> str:
    """Return ``model.py:50 LSTM``: the region's lines and what ran (and the rest of its function
    when Dynamo did not resume)."""
    where = os.path.basename(file) if file else "?"
    if line:
        where += f":{line}" + (f"-{last_line}" if last_line and last_line > line else "")
    if not resumed and function:
        what = f"{what} and the rest of {function}"
    return f"{where} {what}"


def wording(where: str, why: str, setting: Optional[str]) -> str:
    """Return ``model.py:50 LSTM ran eagerly (why: setting)`` for a region's :func:`place`,
    Dynamo's explanation and setting."""
    return f"{where} ran eagerly ({why}{': ' + setting if setting else ''})"


def eager_regions(events) -> tuple[EagerRegion, ...]:
    """Return the regions that ran eagerly, in the order recorded, from a recording's events (the
    :data:`EVENTS` ones are read, others ignored): each graph break once, each function Dynamo
    could not trace once, except one whose error ended the script (``fullgraph=True``)."""
    events = list(events)
    raised = {_failure_key(e.data) for e in events if e.event == "dynamo_raised" and isinstance(e.data, dict)}
    out, seen = [], set()
    for e in events:
        d = e.data if isinstance(e.data, dict) else {}
        if e.event == "dynamo_graph_break":
            region = _from_break(d)
        elif e.event == "dynamo_frame_failed" and _failure_key(d) not in raised:
            region = _from_failure(d)
        else:
            continue
        key = (region.kind, region.file, region.line, region.why)
        if key not in seen:
            seen.add(key)
            out.append(region)
    # A break with nothing traced before it fails the whole function: both records say so, and
    # the break's names the module, so it stands for both.
    failed = {(r.file, r.line): r for r in out if r.kind == NOT_TRACED}
    broke = {(r.file, r.line) for r in out if r.kind == GRAPH_BREAK}
    merged = []
    for r in out:
        whole = failed.get((r.file, r.line)) if r.kind == GRAPH_BREAK else None
        if r.kind == NOT_TRACED and (r.file, r.line) in broke:
            continue
        if whole is not None:
            where = place(r.file, r.line, None, f"{r.module or 'this call'} (all of {whole.function or r.function})",
                          True, None)
            r = replace(r, resumed=False, where=where, text=wording(where, r.why, r.setting))
        merged.append(r)
    return tuple(merged)


def _failure_key(d: dict) -> tuple:
    """A Dynamo failure's identity as ``dynamo_raised`` and ``dynamo_frame_failed`` both record it:
    its type and the first line of its text."""
    lines = str(d.get("reason") or "").strip().splitlines()
    return str(d.get("fail_type")), (" ".join(lines[0].split()) if lines else "")


def _from_break(d: dict) -> EagerRegion:
    reason = _str(d.get("reason")) or "Dynamo could not trace it"
    why, setting = explain(reason)
    file, line, last = _str(d.get("at_file"), 500), _int(d.get("at_line")), _int(d.get("last_line"))
    first = _int(d.get("first_line"))
    resumed = d.get("resumed") is not False
    module, function, code = _str(d.get("module"), 100), _str(d.get("frame_function"), 200), _str(d.get("code"), 300) or ""
    inner = d.get("inner") if isinstance(d.get("inner"), list) else []
    stop = inner[-1] if inner and isinstance(inner[-1], dict) else {}
    stopped = (f"{os.path.basename(_str(stop.get('file'), 500) or '?')}:{_int(stop.get('line')) or '?'}"
               if stop else None)
    what = module or (f"`{code.strip()}`" if code else "this call")
    if resumed and first and last and first < (line or first):
        line = first
    where = place(file, line, last, what, resumed, function)
    return EagerRegion(GRAPH_BREAK, file, line, last, code, module, function, resumed, why, setting,
                       reason, stopped, wording(where, why, setting), where)


def _from_failure(d: dict) -> EagerRegion:
    reason = _str(d.get("reason")) or _str(d.get("fail_type"), 200) or "Dynamo could not trace it"
    why, setting = explain(reason)
    file = _str(d.get("at_file"), 500) or _str(d.get("file"), 500)
    line = _int(d.get("at_line")) or _int(d.get("line"))
    function = _str(d.get("function"), 200)
    where = place(file, line, None, f"{function or 'a function'} (whole function)", True, None)
    text = wording(where, why, setting)
    return EagerRegion(NOT_TRACED, file, line, None, "", None, function, False, why, setting,
                       dynamo_reason(reason), None, text, where)


def eager_head(chains_eager: int, chains_total: int, regions) -> str:
    """Return the summary line of what did not run compiled: the compiled chains that fell back to
    eager (of those run) and the code regions Dynamo left to eager, so a run whose model mostly
    ran eagerly never reads as fully compiled."""
    head = (f"{chains_eager} of {chains_total} chains ran eagerly" if chains_total
            else "no chain was compiled")
    n = len(regions)
    if n:
        head += f" · {n} code region{'' if n == 1 else 's'} Dynamo skipped ran eagerly"
    return head


def regions_at(regions, file: str, line: int) -> list[EagerRegion]:
    """Return the regions that cover ``line`` of ``file``."""
    return [r for r in regions if r.covers(file, line)]


def eager_short(regions) -> Optional[str]:
    """Return the status bar's few words for the regions Dynamo left to eager (``2 regions
    eager (Dynamo)``), or None when there are none."""
    n = len(regions)
    return f"{n} region{'' if n == 1 else 's'} eager (Dynamo)" if n else None


def beside_regions(fallbacks) -> list:
    """Return the Dynamo fallbacks (``present.status.Fallback``) a view lists beside the eager
    regions: all but the functions Dynamo could not trace, which are regions themselves."""
    from .status import NOT_TRACED as UNTRACED
    return [f for f in fallbacks if f.kind != UNTRACED]
