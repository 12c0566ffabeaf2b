"""Looped reductions: a reduction part whose rows are longer than one GPU block.

A persistent reduction (:class:`.triton_codegen.Part`) holds a whole row in its ``[BM, BN]`` tile.
When a row is longer than one block allows (:func:`.triton_region.block_sizes` sets ``looped`` for
the CUDA plan), the part walks each row in chunks of ``BN`` instead:

- the reductions run one after another, in member order; reduction ``j`` gets a loop over the
  row's chunks that recomputes every full-level value it (transitively) reads and accumulates the
  chunk's partial result into a per-row accumulator declared before the loop (sums add, max/min
  combine, variances merge count, mean and M2 per chunk with Chan et al.'s parallel formula);
- row-level ops (on reduction results and per-row inputs) run outside the loops, as soon as the
  reductions they read are finished;
- a last loop recomputes the full-level values the part stores and stores them chunk by chunk.

Full-level values never outlive a loop (each pass recomputes what it needs; what no store or
accumulator reads is dead code the compiler drops). Names follow the part's prefix like every
other line, so looped parts compose into sections and phases.
"""
from __future__ import annotations

from ..ir import BoundSymbol, TensorProxy
from . import triton_ops as ops
from .triton_region import FREE_OPS, Const, Tile, Virtual, prim_name


class LoopedReductions:
    """The looped-reduction generation of :class:`.triton_codegen.Part` (a mixin)."""

    def _deps(self) -> dict:
        """Return {member index: set of reduction member indices it reads, transitively}."""
        producer = {p.name: i for i, b in enumerate(self.members) for p in b.flat_outputs()}
        deps: dict[int, set] = {}
        for i, b in enumerate(self.members):
            d: set = set()
            for p in b.flat_inputs():
                j = producer.get(p.name)
                if j is not None:
                    d |= deps[j]
                    if prim_name(self.members[j]) in ops.REDUCTIONS:
                        d.add(j)
            deps[i] = d
        return deps

    def _level_of(self, b: BoundSymbol):
        out = b.outputs
        if not isinstance(out, TensorProxy):
            return None
        from .triton_index import numel
        n = numel(out.shape)
        if n == self.M * self.N:
            return "full"
        return "row" if n == self.M else "scalar"

    def _loop_open(self, var: str) -> None:
        p, bn = self.p, self.sizes["BN"]
        L = f"{p}m * {self.N} + {p}n" if self.layout == "inner" else f"{p}n * {self.M} + {p}m"
        self.current_uid = None
        self.line(f"    for {var} in range(0, {self.N}, {bn}):")
        self.indent = "    "
        self.line(f"    {p}n = {var} + tl.arange(0, {bn})[None, :]")
        self.line(f"    {p}mask = {p}mask_m & ({p}n < {self.N})")
        self.line(f"    {p}L = {L}")

    def _loop_close(self, full: set) -> None:
        self.indent = ""
        self.cache = {k: v for k, v in self.cache.items() if k[2] != "full"}  # loads of the loop die with it
        for name in [n for n, v in self.env.items() if isinstance(v, Tile) and v.level == "full"]:
            del self.env[name]

    def _run_looped(self) -> None:
        deps = self._deps()
        reds = [i for i, b in enumerate(self.members) if prim_name(b) in ops.REDUCTIONS]
        levels = {i: self._level_of(b) for i, b in enumerate(self.members)}
        done: set = set()
        emitted: set = set()

        def outside(ready: set) -> None:  # row and scalar ops whose reductions are finished
            for i, b in enumerate(self.members):
                if i in emitted or i in reds or levels[i] == "full" or not deps[i] <= ready:
                    continue
                if prim_name(b) in FREE_OPS or levels[i] in ("row", "scalar"):
                    self.current_uid = b.uid
                    self.op(b)
                    emitted.add(i)
            self.current_uid = None

        def full_ops(ready: set, upto=None) -> None:
            for i, b in enumerate(self.members):
                if upto is not None and i >= upto:
                    break
                if levels[i] == "full" and i not in reds and deps[i] <= ready:
                    self.current_uid = b.uid
                    self.op(b)
            self.current_uid = None

        outside(done)
        for k, r in enumerate(reds):
            self._acc = self._accumulator_init(self.members[r], k)
            self._loop_open(f"{self.p}c{k}")
            full_ops(done, upto=r)
            self.current_uid = self.members[r].uid
            self.op(self.members[r])  # -> reduction(): the chunk's update of the accumulator
            self._loop_close(done)
            self._finish_reduction(self.members[r])
            done.add(r)
            emitted.add(r)
            outside(done)
        self._acc = None
        self._stores_pending = True

    def _store_looped(self, outputs: list) -> None:
        """Store the part's outputs: full-level ones chunk by chunk in a last loop, the rest after."""
        from .triton_index import numel
        full = [(k, p) for k, p in enumerate(outputs) if numel(p.shape) == self.M * self.N]
        rest = [(k, p) for k, p in enumerate(outputs) if numel(p.shape) != self.M * self.N]
        deps = self._deps()
        reds = {i for i, b in enumerate(self.members) if prim_name(b) in ops.REDUCTIONS}
        if full:
            self._loop_open(f"{self.p}cs")
            for i, b in enumerate(self.members):
                if self._level_of(b) == "full" and i not in reds and deps[i] <= reds:
                    self.current_uid = b.uid
                    self.op(b)
            for k, p in full:
                self._store_one(k, p)
            self._loop_close(set())
        for k, p in rest:
            self._store_one(k, p)

    # ------------------------------------------------------------------ accumulators
    def _accumulator_init(self, b: BoundSymbol, k: int) -> dict:
        name = prim_name(b)
        C = ops.compute_dtype((b.args[0] if name in ops.INDEX_REDUCTIONS else b.outputs).dtype)
        T = ops.TL_DTYPE[C] if C in ops.TL_DTYPE else "tl.float32"
        shape = f"[{self.sizes['BM']}, 1]"
        acc = {"name": name, "C": C, "v": f"{self.p}acc{k}", "n": f"{self.p}cnt{k}", "m2": f"{self.p}m2_{k}",
               "nan": f"{self.p}nan{k}"}
        self.current_uid = b.uid
        if name in ("sum", "mean"):
            self.line(f"    {acc['v']} = tl.zeros({shape}, {T})")
        elif name in ops.TRUTH_REDUCTIONS:
            acc["fill"] = ops.TRUTH_REDUCTIONS[name][1]
            self.line(f"    {acc['v']} = tl.full({shape}, {acc['fill']}, tl.int32)")
        elif name in ("amax", "amin"):
            acc["fill"] = self.extreme_fill(name, C)
            self.line(f"    {acc['v']} = tl.full({shape}, {acc['fill']}, {T})")
            self.line(f"    {acc['nan']} = tl.zeros({shape}, tl.int32)")
        elif name in ops.INDEX_REDUCTIONS:  # the best value so far, its first index, the first NaN's
            fill = self.extreme_fill("amax" if name == "argmax" else "amin", C)
            self.line(f"    {acc['v']} = tl.full({shape}, {fill}, {T})")
            self.line(f"    {acc['n']} = tl.full({shape}, {self.N}, tl.int32)")
            self.line(f"    {acc['nan']} = tl.full({shape}, {self.N}, tl.int32)")
        else:  # var: running count, mean and M2
            self.line(f"    {acc['v']} = tl.zeros({shape}, tl.float32)")
            self.line(f"    {acc['n']} = tl.zeros({shape}, tl.float32)")
            self.line(f"    {acc['m2']} = tl.zeros({shape}, tl.float32)")
        return acc

    def _reduce_chunk(self, xv: str) -> None:
        """Emit, inside the loop, the update of the current accumulator with chunk values ``xv``."""
        a, mask = self._acc, self.mask("full")
        if a["name"] in ("sum", "mean"):
            self.line(f"    {a['v']} = {a['v']} + tl.sum(tl.where({mask}, {xv}, 0), axis=1, keep_dims=True)")
        elif a["name"] in ops.TRUTH_REDUCTIONS:
            red = ops.TRUTH_REDUCTIONS[a["name"]][0]
            xi = self.emit(f"({xv} != 0).to(tl.int32)")
            self.line(f"    {a['v']} = tl.{'maximum' if red == 'max' else 'minimum'}({a['v']}, "
                      f"tl.{red}(tl.where({mask}, {xi}, {a['fill']}), axis=1, keep_dims=True))")
        elif a["name"] in ops.INDEX_REDUCTIONS:
            # a later chunk's extreme replaces the one so far only when strictly better (ties keep
            # the first index), or when none was found yet (rows of NaN or of -inf so far)
            best, first = self.first_extreme(a["name"], xv, a["C"], mask)
            better = ">" if a["name"] == "argmax" else "<"
            take = self.emit(f"({best} {better} {a['v']}) | (({a['n']} >= {self.N}) & ({first} < {self.N}))")
            self.line(f"    {a['n']} = tl.where({take}, {first}, {a['n']})")
            self.line(f"    {a['v']} = tl.where({take}, {best}, {a['v']})")
            if a["C"] in ops.FLOATS:
                self.line(f"    {a['nan']} = tl.minimum({a['nan']}, tl.min(tl.where({mask} & ({xv} != {xv}), {self.p}n, "
                          f"{self.N}), axis=1, keep_dims=True))")
        elif a["name"] in ("amax", "amin"):
            fn = "tl.maximum" if a["name"] == "amax" else "tl.minimum"
            red = "tl.max" if a["name"] == "amax" else "tl.min"
            self.line(f"    {a['v']} = {fn}({a['v']}, {red}(tl.where({mask}, {xv}, {a['fill']}), axis=1, keep_dims=True))")
            if a["C"] in ops.FLOATS:
                self.line(f"    {a['nan']} = tl.maximum({a['nan']}, tl.max(tl.where({mask} & ({xv} != {xv}), 1, 0), "
                          "axis=1, keep_dims=True))")
        else:
            x = self.emit(f"{xv}.to(tl.float32)")
            cnt = self.emit(f"tl.sum(tl.where({mask}, 1.0, 0.0), axis=1, keep_dims=True)")
            mean = self.emit(f"tl.sum(tl.where({mask}, {x}, 0.0), axis=1, keep_dims=True) / {cnt}")
            d = self.emit(f"tl.where({mask}, {x} - {mean}, 0.0)")
            m2 = self.emit(f"tl.sum({d} * {d}, axis=1, keep_dims=True)")
            tot = self.emit(f"{a['n']} + {cnt}")
            delta = self.emit(f"{mean} - {a['v']}")
            self.line(f"    {a['v']} = {a['v']} + {delta} * {cnt} / {tot}")
            self.line(f"    {a['m2']} = {a['m2']} + {m2} + {delta} * {delta} * {a['n']} * {cnt} / {tot}")
            self.line(f"    {a['n']} = {tot}")

    def _finish_reduction(self, b: BoundSymbol) -> None:
        a, out, N = self._acc, b.outputs, self.N
        self.current_uid = b.uid
        name, C = a["name"], a["C"]
        if name == "sum":
            r = a["v"]
        elif name == "mean":
            r = self.emit(f"{a['v']} / {float(N)!r}")
        elif name in ops.TRUTH_REDUCTIONS:
            r = self.emit(f"{a['v']} != 0")
            C = "bool"
        elif name in ("amax", "amin"):
            r = a["v"]
            if C in ops.FLOATS:
                r = self.emit(f"tl.where({a['nan']} > 0, float('nan'), {r})")
        elif name in ops.INDEX_REDUCTIONS:
            r = a["n"]
            if C in ops.FLOATS:
                r = self.emit(f"tl.where({a['nan']} < {N}, {a['nan']}, {r})")
            r = self.emit(f"{r}.to(tl.int64)")
            C = "int64"
        else:
            from .triton_region import bind
            args = bind(b)
            corr = args.get("correction")
            if "unbiased" in args:
                corr = 1 if args["unbiased"] else 0
            corr = 1 if corr is None else corr
            r = self.emit(f"{a['m2']} / {float(max(N - corr, 0))!r}")
            C = "float32"
        if C != out.dtype:
            r = self.emit(self.cast(r, C, out.dtype))
        self.env[out.name] = Tile(r, self._level_of(b), "row", out.dtype)
        self.current_uid = None


__all__ = ["LoopedReductions", "Const", "Virtual"]
