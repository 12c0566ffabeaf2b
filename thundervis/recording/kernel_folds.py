"""Folded kernels: a repeated layer's kernel is recorded once, with a reference per other instance.

The writer (``writer_rows.insert_kernels``) stores the code and region IR of the first kernel of a
chain with a given fold key; each later instance keeps its own row (name, members, inputs, outputs,
source lines) and a ``kernel_folds`` row pointing at that first instance. Every reader of a
kernel's texts goes through :func:`resolve` (via ``Recording.kernel_source``), so a folded instance
reads as its first instance's code and IR. The file is untrusted: a reference must point at an
existing kernel of the same graph and chain that is not itself folded; anything else is refused
with one sentence (:class:`~.errors.RecordingError`).
"""
from __future__ import annotations

from .errors import RecordingError
from .typed import row_checker

_CHECK_FOLD = row_checker("kernel_folds", ("kernel_id", "fold_of"), ("int", "int"))

# What kernel_source selects of a kernel row: id, graph, chain, name, language, code, IR, members.
KERNEL_TEXT_COLUMNS = ("id, graph_id, chain, name, language, code, trace_json, CASE WHEN json_valid(members)"
                       " THEN json_array_length(members) ELSE 0 END")


def fold_map(store) -> dict:
    """Return ``{folded kernel id: first instance id}`` as recorded (checked for types only); None
    for an older recording, which has no ``kernel_folds`` table (its kernels were never folded)."""
    if not store.has_table("kernel_folds"):
        return None
    return dict(_CHECK_FOLD(store.rows("SELECT kernel_id, fold_of FROM kernel_folds ORDER BY kernel_id"), store.path))


def fold_of(store, kernel_id: int):
    """Return the id of the kernel ``kernel_id`` folds into (None: it holds its own texts)."""
    if not store.has_table("kernel_folds"):
        return None
    rows = _CHECK_FOLD(store.rows("SELECT kernel_id, fold_of FROM kernel_folds WHERE kernel_id=?", (kernel_id,)),
                       store.path)
    return rows[0][1] if rows else None


def resolve(store, row: tuple) -> tuple:
    """Return the kernel row ``row`` (:data:`KERNEL_TEXT_COLUMNS`) with the code and IR it reads:
    its own, or, for a folded instance, its first instance's. Raise RecordingError (one sentence)
    for a reference to nothing, to itself, to a folded kernel (a chain) or across graphs/chains."""
    kid, graph, chain, name = row[0], row[1], row[2], row[3]
    target = fold_of(store, kid)
    if target is None:
        return row
    what = f"{store.path} says kernel {name!r} is folded into kernel id {target}"
    if target == kid:
        raise RecordingError(f"{what}, which is itself; the recording is damaged.")
    found = store.rows(f"SELECT {KERNEL_TEXT_COLUMNS} FROM kernels WHERE id=?", (target,))
    if not found:
        raise RecordingError(f"{what}, which does not exist; the recording is damaged.")
    first = found[0]
    if (first[1], first[2]) != (graph, chain):
        raise RecordingError(f"{what}, which belongs to another graph or chain; the recording is damaged.")
    if fold_of(store, target) is not None:
        raise RecordingError(f"{what}, which is folded in turn; the recording is damaged.")
    return row[:4] + (row[4] if row[4] is not None else first[4], first[5], first[6], first[7])
