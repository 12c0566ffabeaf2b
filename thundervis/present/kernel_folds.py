"""Folded kernels: a repeated layer's kernels as one row of the kernel table (``bw_fusion_4 × 32``).

Which kernels fold is read from the recording: the writer records each repeated layer's kernel once
and points the later instances at the first (``Recording.kernel_folds``). A recording made before
folds were recorded folds by structure instead: the same executor, chain, ops and input/output
shapes and dtypes (what ``present.abstract_fit`` labelled before). Folding is structural, so real
runs fold as abstract ones do.

The kernel table (``ls``, the TUI, the widget) collapses a group of at least :data:`FOLD_AT`
instances into one row, at the first instance's place; smaller groups stay one row per kernel, so
a 2-layer model shows both of its layers' kernels. A folded row opens its first instance (the one
that holds the code). Its times are the sum over its instances (what the fold costs per step:
``calls`` and ``median_us`` summed, the share of the step summed); each instance's own time is in
``ls --json``'s unfolded ``fusions`` list.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

FOLD_AT = 3  # instances from which the kernel table shows one folded row
SUMMARY_NAMES = 8  # instance names a folded row's summary lists before ", …"
_INDEX = re.compile(r"^(?:(.*?)\.)?(\d+)(\..*)?$")  # the first numbered part of a module path


@dataclass(frozen=True)
class KernelFold:
    """Kernels of one graph and chain equal but for value names (one per repeated layer): their ids
    and names in build order, and ``layers``, the layer range they come from (``model.layers.0–31``;
    "" when their module paths do not say)."""

    graph: int
    chain: str
    ids: tuple
    names: tuple
    layers: str

    @property
    def count(self) -> int:
        """How many instances."""
        return len(self.ids)

    @property
    def label(self) -> str:
        """``fw_fusion_3 × 32``: the first instance's name and the count."""
        return f"{self.names[0]} × {self.count}"

    @property
    def opens(self) -> int:
        """The kernel id a view opens for the fold: the first instance's (it holds the code)."""
        return self.ids[0]

    @property
    def folded(self) -> bool:
        """Whether the kernel table shows it as one row (at least :data:`FOLD_AT` instances)."""
        return self.count >= FOLD_AT

    @property
    def summary(self) -> str:
        """What a folded row's detail says: ``model.layers.0–31 · the first of 32 is shown, times
        summed over all of them · instances fw_fusion_3, fw_fusion_9, …``."""
        names = ", ".join(self.names[:SUMMARY_NAMES]) + (", …" if self.count > SUMMARY_NAMES else "")
        layers = f"{self.layers} · " if self.layers else ""
        return f"{layers}the first of {self.count} is shown, times summed over all of them · instances {names}"

    def as_json(self) -> dict:
        """Return ``{graph, chain, label, count, ids, names, layers, opens, folded, summary}``."""
        return {"graph": self.graph, "chain": self.chain, "label": self.label, "count": self.count,
                "ids": list(self.ids), "names": list(self.names), "layers": self.layers, "opens": self.opens,
                "folded": self.folded, "summary": self.summary}


def layer_of(module) -> Optional[tuple]:
    """Return ``(block head, layer index)`` of a module path at its first numbered part
    (``model.layers.7.mlp`` -> ``("model.layers", 7)``), None when no part is a number or
    ``module`` is not a string (recorded values are untrusted)."""
    m = _INDEX.match(module) if isinstance(module, str) else None
    return (m.group(1) or "", int(m.group(2))) if m else None


def _layer(k) -> Optional[tuple]:
    """Return (block head, layer index) of kernel ``k`` from its first numbered module path."""
    for s in k.source_lines:
        found = layer_of(s.get("module")) if isinstance(s, dict) else None
        if found:
            return found
    return None


def layer_range(kernels) -> str:
    """Return ``model.layers.0–31`` for kernels from the layers of one block, as many from each
    layer (two RMSNorms a layer: 64 kernels over 0–31), else ""."""
    found = [_layer(k) for k in kernels]
    if not found or any(f is None for f in found) or len({f[0] for f in found}) != 1:
        return ""
    per_layer: dict = {}
    for f in found:
        per_layer[f[1]] = per_layer.get(f[1], 0) + 1
    if len(set(per_layer.values())) != 1:
        return ""
    indices = sorted(per_layer)
    head = f"{found[0][0]}." if found[0][0] else ""
    return f"{head}{indices[0]}–{indices[-1]}" if len(indices) > 1 else f"{head}{indices[0]}"


def _structure(k) -> tuple:
    def meta(ts):
        return tuple((str(t.get("shape")), str(t.get("dtype"))) for t in ts if isinstance(t, dict))
    return (k.graph, k.chain, k.executor, tuple(map(str, k.ops)), meta(k.inputs), meta(k.outputs))


def fold_groups(kernels, recorded: Optional[dict]) -> tuple:
    """Return the :class:`KernelFold` s (two instances or more) of ``kernels`` (``KernelInfo`` s in
    build order): by ``recorded`` (``{folded id: first id}``; None: not recorded, fold by structure).
    A reference to a kernel not in ``kernels`` or of another graph or chain is ignored here (reading
    its code says what is wrong)."""
    by_id = {k.id: k for k in kernels}
    groups: dict = {}
    for k in kernels:
        if recorded is None:
            key = _structure(k)
        else:
            first = by_id.get(recorded.get(k.id, k.id))
            ok = first is not None and (first.graph, first.chain) == (k.graph, k.chain) and first.id not in recorded
            key = first.id if ok else k.id
        groups.setdefault(key, []).append(k)
    return tuple(KernelFold(ks[0].graph, ks[0].chain, tuple(k.id for k in ks), tuple(k.name for k in ks),
                            layer_range(ks)) for ks in groups.values() if len(ks) > 1)


def kernel_folds(rec, kernels=None) -> tuple:
    """Return the :class:`KernelFold` s of recording ``rec`` (of ``kernels`` when given: its
    ``KernelInfo`` s); damaged fold rows fold nothing. Raises what the reader raises for kernels."""
    from thundervis.recording import RecordingError
    kernels = rec.kernels() if kernels is None else kernels
    try:
        recorded = rec.kernel_folds()
    except RecordingError:  # a damaged fold row: nothing folds here; opening such a kernel says why
        recorded = {}
    return fold_groups(kernels, recorded)


def fold_labels(folds) -> dict:
    """Return ``{(graph, chain, kernel name): "fw_fusion_3 × 32"}`` for every instance of ``folds``."""
    return {(f.graph, f.chain, name): f.label for f in folds for name in f.names}


def _total(values) -> Optional[float]:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def folded_table(rows, folds) -> tuple:
    """Return the kernel table ``rows`` (``present.kernel_rows.KernelRow`` s) with each folded
    group (:attr:`KernelFold.folded`) as one row at its first instance's place: that row's ``fold``
    set, its times and roofline summed over the instances; other rows unchanged."""
    fold_of = {i: f for f in folds if f.folded for i in f.ids}
    members: dict = {}
    for r in rows:
        if r.id in fold_of:
            members.setdefault(fold_of[r.id], []).append(r)
    out, shown = [], set()
    for r in rows:
        f = fold_of.get(r.id)
        if f is None:
            out.append(r)
        elif f not in shown:  # the first instance's place (the first of them the rows hold)
            shown.add(f)
            rs = members[f]
            calls = _total(x.calls for x in rs)
            out.append(replace(rs[0], fold=f, calls=int(calls) if calls is not None else None,
                               median_us=_total(x.median_us for x in rs), share=_total(x.share for x in rs),
                               gbps=None, roofline_us=_total(x.roofline_us for x in rs),
                               bytes_moved=_total(x.bytes_moved for x in rs), flops=_total(x.flops for x in rs),
                               pct_of_roofline=None))
    return tuple(out)


def folded_row_cells(rows_by_id: dict, fold_json: dict, cells: tuple) -> dict:
    """Return the ``cells`` (keys of ``KernelRow.as_json()``) of a folded group's one row, as
    :func:`folded_table` sums it, for the group whose JSON (:meth:`KernelFold.as_json`) is
    ``fold_json``; ``rows_by_id``: {kernel id: KernelRow} with whatever roofline is known. Every
    front end shows a fold's roofline as this sum, not as its first instance's."""
    rs = [rows_by_id[i] for i in fold_json.get("ids", ()) if i in rows_by_id]
    if not rs:
        return {}
    fold = KernelFold(graph=fold_json["graph"], chain=fold_json["chain"], ids=tuple(r.id for r in rs),
                      names=tuple(r.name for r in rs), layers=fold_json.get("layers") or "")
    (row,) = folded_table(rs, (fold,)) if fold.folded else rs[:1]
    d = row.as_json()
    return {c: d.get(c) for c in cells}


def fold_json_by_kernel(rec, kernels, rows) -> dict:
    """Return ``{kernel id: fold JSON}`` for every kernel of a fold (``ls --json``'s ``fold`` of a
    fusion): :meth:`KernelFold.as_json` plus, for a folded one, ``row_label`` (``fw_fusion_3 × 32
    [triton]``) and the summed ``calls``, ``median_us``, ``median`` and ``share_text`` (present.units)
    of its row. ``kernels``: the recording's ``KernelInfo`` s; ``rows``: their kernel table."""
    from .units import format_share, format_us
    folds = kernel_folds(rec, kernels)
    table = {r.fold: r for r in folded_table(rows, folds) if r.fold is not None}
    out = {}
    for f in folds:
        d = f.as_json()
        r = table.get(f)
        if r is not None:
            d.update(row_label=r.label, calls=r.calls, median_us=r.median_us, median=format_us(r.median_us),
                     share_text=format_share(r.share))
        for i in f.ids:
            out[i] = d
    return out
