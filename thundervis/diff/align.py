"""Pass diff: align two traces of one chain, by symbol identity first and by text second.

Identity comes from the IR: a symbol that survives a pass keeps its ``uid``; a symbol a pass made
from others lists their uids in ``origin`` (a decomposition its parent, CSE the ops it merged, a
fusion its members). Lines that identity cannot place are aligned by their text (difflib within the
gaps between identity anchors). Everything is dict lookups plus one longest-increasing-subsequence
(n log n), so a 100k-symbol diff takes well under a second.

Statuses per line: ``unchanged``, ``changed`` (same symbol, new text), ``added``, ``removed``,
``replaced-by`` (the symbol is gone, the partner lines took its place), ``fused-into`` (its op now
runs inside a kernel; ``kernel`` names it) and ``moved`` (same symbol, out of order).
"""
from __future__ import annotations

import bisect
import contextlib
import difflib
import gc
import re
from dataclasses import dataclass, field
from typing import Optional, Sequence

from thundervis.compiler.ir import Trace

from .lines import Line, is_fusion, trace_lines

UNCHANGED = "unchanged"
CHANGED = "changed"
ADDED = "added"
REMOVED = "removed"
REPLACED = "replaced-by"
FUSED = "fused-into"
MOVED = "moved"
STATUSES = (UNCHANGED, CHANGED, ADDED, REMOVED, REPLACED, FUSED, MOVED)

# Gaps larger than this are first split on lines whose text is unique on both sides (patience
# diff) before difflib sees them, so text alignment stays near-linear on big unmatched regions.
_DIFFLIB_LIMIT = 400


@dataclass(slots=True)
class DiffLine:
    """One row of a diff: the line before (``a``), after (``b``), or both.

    ``partners`` are related lines on the other side: for ``replaced-by`` the replacing lines, for
    ``fused-into`` the fusion line, for an ``added`` line the lines it was made from, for ``moved``
    its twin. ``how`` says how the pair was found: ``uid``, ``origin``, ``merged`` (replaced by a
    symbol that existed before, as CSE does), ``flattened`` (replaced by its own subsymbols, as
    claim does), ``text`` or ``""``.
    """

    status: str
    a: Optional[Line] = None
    b: Optional[Line] = None
    partners: tuple[Line, ...] = ()
    kernel: Optional[str] = None
    how: str = ""

    @property
    def uid(self) -> str:
        """The uid of the line shown (after side when there is one)."""
        return (self.b or self.a).uid


@dataclass
class TraceDiff:
    """The aligned lines of two traces plus what they are (``before``/``after`` labels)."""

    before: str
    after: str
    lines: list[DiffLine] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Return the number of rows per status (every status present, zeros included)."""
        out = dict.fromkeys(STATUSES, 0)
        for d in self.lines:
            out[d.status] += 1
        return out

    @property
    def changed(self) -> bool:
        """True when any row is not ``unchanged``."""
        return any(d.status != UNCHANGED for d in self.lines)

    def kernels(self) -> dict[str, list[DiffLine]]:
        """Return kernel name -> the before-side rows fused into it, in order."""
        out: dict[str, list[DiffLine]] = {}
        for d in self.lines:
            if d.status == FUSED and d.a is not None and d.kernel:
                out.setdefault(d.kernel, []).append(d)
        return out

    def summary(self) -> str:
        """Return a one-line summary such as ``3 changed, 2 fused into 1 kernel, 40 unchanged``."""
        c = self.counts()
        parts = []
        for status in (CHANGED, ADDED, REMOVED, REPLACED, MOVED):
            if c[status]:
                parts.append(f"{c[status]} {status}")
        k = self.kernels()
        if k:
            n = sum(len(v) for v in k.values())
            parts.append(f"{n} fused into {len(k)} kernel{'s' if len(k) != 1 else ''}")
        parts.append(f"{c[UNCHANGED]} unchanged")
        return ", ".join(parts)


def _label(t: Trace) -> str:
    return f"{t.chain} after {t.pass_name}"


def diff_traces(a: Trace, b: Trace, depth: int = 1, text_fallback: bool = True) -> TraceDiff:
    """Return the aligned diff of trace ``a`` (before) and ``b`` (after), subsymbols down to
    ``depth``; ``text_fallback=False`` skips the text alignment of lines identity cannot place."""
    with gc_paused():
        out = align_lines(trace_lines(a, depth), trace_lines(b, depth), text_fallback)
    return TraceDiff(_label(a), _label(b), out)


@contextlib.contextmanager
def gc_paused():
    """Pause the cyclic garbage collector for the block. Aligning allocates a few objects per line
    and no cycles; left on, the collector rescans the growing heap again and again and makes big
    diffs superlinear (100k symbols: 3x slower per symbol)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def align_lines(A: Sequence[Line], B: Sequence[Line], text_fallback: bool = True) -> list[DiffLine]:
    """Return the diff rows aligning before-lines ``A`` with after-lines ``B`` (see module doc)."""
    n_b = len(B)
    b_uids = [lb.uid for lb in B]
    # First after-line per uid, built in C from the reversed list so that earlier lines win.
    b_by_uid = dict(zip(reversed(b_uids), range(n_b - 1, -1, -1)))
    not_first = (set() if len(b_by_uid) == n_b
                 else {j for j, u in enumerate(b_uids) if b_by_uid[u] != j})
    made_from: dict[str, list[int]] = {}  # before-uid -> after-lines whose origin names it
    for j, lb in [(j, lb) for j, lb in enumerate(B) if lb.origin]:
        uid = lb.uid
        for o in lb.origin:
            if o != uid:
                made_from.setdefault(o, []).append(j)
    named = bytearray(n_b)  # after-lines whose uid some origin names
    for o in made_from:
        j = b_by_uid.get(o)
        if j is not None:
            named[j] = 1
    a_row: list[Optional[DiffLine]] = [None] * len(A)  # decided rows for before-only lines
    b_row: list[Optional[DiffLine]] = [None] * n_b  # decided rows for after-only lines
    a_of_b: list[Optional[int]] = [None] * n_b  # after-line -> before-line with its uid
    origin_line: dict[str, Line] = {}  # before-lines that some after-line names in its origin
    replaced: list[tuple[int, list[int]]] = []
    pair_a: list[int] = []  # identity pairs (pair_a[k], pair_b[k]), kept as two lists: no tuple each
    pair_b: list[int] = []
    fusion_at: dict[int, Optional[tuple[Line]]] = {}  # after-line index -> (it,) if a fusion
    j_next = 0
    for i, la in enumerate(A):
        uid = la.uid
        # Most lines sit where the previous match leads: check there before probing the dicts,
        # which on a big trace costs a cache miss per line.
        if j_next < n_b and b_uids[j_next] == uid and j_next not in not_first:
            j = j_next
            js = made_from.get(uid) if named[j] else None
        else:
            j = b_by_uid.get(uid)
            js = made_from.get(uid) if made_from else None
        if js is not None and uid not in origin_line:
            origin_line[uid] = la
        if j is not None and a_of_b[j] is None:
            a_of_b[j] = i
            j_next = j + 1
            lb = B[j]
            p = lb.parent
            if p is not None:
                fusion = fusion_at.get(p, False)
                if fusion is False:  # first member seen: (kernel line,) shared by all its rows
                    fusion = fusion_at[p] = (B[p],) if is_fusion(B[p].symbol) else None
                if fusion is not None and (la.parent is None or A[la.parent].uid != fusion[0].uid):
                    kernel = fusion[0].sym
                    a_row[i] = DiffLine(FUSED, la, lb, fusion, kernel, "uid")
                    b_row[j] = DiffLine(FUSED, None, lb, (la,), kernel, "uid")
                    continue
            pair_a.append(i)
            pair_b.append(j)
        elif js:
            replaced.append((i, js))
    b_paired = [i is not None for i in a_of_b]

    for i, js in replaced:
        la = A[i]
        partners = tuple(B[k] for k in js)
        fusions = [p for p in partners if is_fusion(p.symbol)]
        if fusions:
            a_row[i] = DiffLine(FUSED, la, None, (fusions[0],), fusions[0].sym, "origin")
            continue
        if all(a_of_b[k] is not None and A[a_of_b[k]].parent == i for k in js):
            how = "flattened"  # claim ran the op's own prims instead of the op
        elif all(a_of_b[k] is not None for k in js):
            how = "merged"  # the partner existed before: CSE kept the first copy
        else:
            how = "origin"
        a_row[i] = DiffLine(REPLACED, la, None, partners, None, how)

    # Pairs out of order (a pass moved a symbol) cannot all be anchors: keep the longest
    # in-order subset, show the rest as moved.
    anchor_a, anchor_b = pair_a, pair_b
    if not all(x < y for x, y in zip(pair_b, pair_b[1:])):
        keep = _lis_positions(pair_b)
        anchor_a, anchor_b = [], []
        for k, (i, j) in enumerate(zip(pair_a, pair_b)):
            if k in keep:
                anchor_a.append(i)
                anchor_b.append(j)
            else:
                a_row[i] = DiffLine(MOVED, a=A[i], partners=(B[j],), how="uid")
                b_row[j] = DiffLine(MOVED, b=B[j], partners=(A[i],), how="uid")

    for j in {j for js in made_from.values() for j in js}:
        if b_row[j] is None and not b_paired[j]:
            lb = B[j]
            src = tuple(origin_line[o] for o in lb.origin if o != lb.uid and o in origin_line)
            if src:
                b_row[j] = DiffLine(ADDED, None, lb, src, None, "origin")

    out: list[DiffLine] = []
    append = out.append
    ia = jb = 0
    for i, j in zip(anchor_a, anchor_b):
        if i > ia or j > jb:
            _gap(A, B, ia, i, jb, j, a_row, b_row, text_fallback, out)
        la, lb = A[i], B[j]
        sa = la.symbol
        same = (sa is not None and sa is lb.symbol and la.depth == lb.depth) or la.text == lb.text
        append(DiffLine(UNCHANGED if same else CHANGED, la, lb, (), None, "uid"))
        ia, jb = i + 1, j + 1
    _gap(A, B, ia, len(A), jb, len(B), a_row, b_row, text_fallback, out)
    return out


def _gap(A, B, i0, i1, j0, j1, a_row, b_row, text_fallback, out) -> None:
    """Emit the rows of the gap A[i0:i1] / B[j0:j1] between two identity anchors."""
    if i0 >= i1 and j0 >= j1:
        return
    if i1 - i0 + j1 - j0 <= 8 and (None not in a_row[i0:i1] or None not in b_row[j0:j1]):
        # Small gap with nothing for text alignment (the common case): emit as decided.
        for k in range(i0, i1):
            out.append(a_row[k] or DiffLine(REMOVED, A[k]))
        for k in range(j0, j1):
            out.append(b_row[k] or DiffLine(ADDED, None, B[k]))
        return
    free_a = [i for i in range(i0, i1) if a_row[i] is None]
    free_b = [j for j in range(j0, j1) if b_row[j] is None]
    matches: list[tuple[int, int, bool]] = []
    if text_fallback and free_a and free_b:
        ta = [A[i].text for i in free_a]
        tb = [B[j].text for j in free_b]
        matches = [(free_a[x], free_b[y], eq) for x, y, eq in match_text(ta, tb)]
    ia, jb = i0, j0
    for i, j, eq in matches + [(i1, j1, True)]:
        for k in range(ia, i):
            out.append(a_row[k] or DiffLine(REMOVED, a=A[k]))
        for k in range(jb, j):
            out.append(b_row[k] or DiffLine(ADDED, b=B[k]))
        if i < i1:
            out.append(DiffLine(UNCHANGED if eq else CHANGED, a=A[i], b=B[j], how="text"))
        ia, jb = i + 1, j + 1


def _lis_positions(seq: Sequence[int]) -> set[int]:
    """Return the positions in ``seq`` of one longest strictly increasing subsequence."""
    if not seq:
        return set()
    if all(seq[k] < seq[k + 1] for k in range(len(seq) - 1)):
        return set(range(len(seq)))
    tails: list[int] = []  # smallest tail value of an increasing run of each length
    tail_pos: list[int] = []
    prev = [-1] * len(seq)
    for k, v in enumerate(seq):
        n = bisect.bisect_left(tails, v)
        if n == len(tails):
            tails.append(v)
            tail_pos.append(k)
        else:
            tails[n] = v
            tail_pos[n] = k
        prev[k] = tail_pos[n - 1] if n else -1
    keep, k = set(), tail_pos[-1]
    while k != -1:
        keep.add(k)
        k = prev[k]
    return keep


def match_text(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int, bool]]:
    """Return in-order matches ``(x, y, equal)`` between text lines ``a`` and ``b``: equal lines,
    and similar lines paired as changed. Large inputs are split on unique common lines first."""
    if not a or not b:
        return []
    if len(a) + len(b) <= _DIFFLIB_LIMIT:
        return _difflib_match(a, b)
    # Patience split: lines that occur once on each side anchor the alignment.
    count_a: dict[str, int] = {}
    for t in a:
        count_a[t] = count_a.get(t, 0) + 1
    count_b: dict[str, int] = {}
    for t in b:
        count_b[t] = count_b.get(t, 0) + 1
    pos_b = {t: y for y, t in enumerate(b) if count_b[t] == 1}
    cand = [(x, pos_b[t]) for x, t in enumerate(a) if count_a[t] == 1 and t in pos_b]
    keep = _lis_positions([y for _, y in cand])
    anchors = [c for k, c in enumerate(cand) if k in keep]
    if not anchors:
        # No unique anchors: match common prefix and suffix only, the rest stays unmatched.
        out = []
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            out.append((n, n, True))
            n += 1
        m = 0
        while m < min(len(a), len(b)) - n and a[-1 - m] == b[-1 - m]:
            m += 1
        out += [(len(a) - m + k, len(b) - m + k, True) for k in range(m)]
        return out
    out: list[tuple[int, int, bool]] = []
    x0 = y0 = 0
    for x, y in anchors + [(len(a), len(b))]:
        for sx, sy, eq in match_text(a[x0:x], b[y0:y]):
            out.append((x0 + sx, y0 + sy, eq))
        if x < len(a):
            out.append((x, y, True))
        x0, y0 = x + 1, y + 1
    return out


def _difflib_match(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int, bool]]:
    out = []
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, x0, x1, y0, y1 in sm.get_opcodes():
        if tag == "equal":
            out.extend((x0 + k, y0 + k, True) for k in range(x1 - x0))
        elif tag == "replace":
            # Pair similar lines position by position; dissimilar ones stay removed/added.
            for k in range(min(x1 - x0, y1 - y0)):
                if _similar(a[x0 + k], b[y0 + k]):
                    out.append((x0 + k, y0 + k, False))
    return out


def _similar(s: str, t: str) -> bool:
    sm = difflib.SequenceMatcher(None, s, t, autojunk=False)
    return sm.real_quick_ratio() >= 0.6 and sm.quick_ratio() >= 0.6 and sm.ratio() >= 0.6


_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def intraline_spans(a: str, b: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Return the character spans that differ between ``a`` and ``b`` (token-wise), for each."""
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    oa = [0]
    for t in ta:
        oa.append(oa[-1] + len(t))
    ob = [0]
    for t in tb:
        ob.append(ob[-1] + len(t))
    sa, sb = [], []
    for tag, x0, x1, y0, y1 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if x1 > x0:
            sa.append((oa[x0], oa[x1]))
        if y1 > y0:
            sb.append((ob[y0], ob[y1]))
    return sa, sb
