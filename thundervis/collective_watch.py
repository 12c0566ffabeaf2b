"""Record the collectives that run outside the compiled graphs, in order, between them.

In torch 2.13 much of distributed training's communication never reaches a compiled graph: DDP's
gradient all-reduces run in its C++ reducer during the backward (unless compiled autograd traces
the python reducer), and FSDP2 wraps every hook in ``torch._dynamo.disable``, so its all-gathers
and reduce-scatters run eagerly between our graphs. Both, like any ``torch.distributed`` call of
the script, reach the C++ ``ProcessGroup``, which issues each collective through a dispatcher op
(``c10d::allreduce_``, ``c10d::_allgather_base_`` ...). :class:`CollectiveWatcher` registers one
Python kernel per ``c10d`` op under the ``Autograd`` alias key, where those ops have none of their
own (torch's autograd fallback runs there): it notes the collective and redispatches as the
fallback does, below ``ADInplaceOrView``, so the collective itself, its arguments and its order are
untouched. What the fallback adds for inputs that require grad with grad mode on (a backward that
warns) is not reproduced. Tensors under ``inference_mode`` carry no autograd key and are not seen.

The backend announces every call of a compiled chain (:mod:`thundervis.compiler.chain_calls`), so
each collective is placed between the chain call that ran last before it and the one that runs next
after it (graph, chain, call count). A collective issued while a chain runs is a traced
communication op of that chain (already in its trace): counted, not listed again.

What is written (``collective`` events, one per collective, then one ``collective_summary``):
every collective of the first :data:`FULL_STEPS` steps (a step: the calls between two calls of the
first chain that ran; DDP rebuilds its buckets after the first), at most :data:`FULL_LIMIT`, with
op, process group size and name, input and output shapes and dtypes, bytes, whether it was
asynchronous, its duration (issue to completion, from the work's future) and who issued it (the
innermost torch frame and the user's source line); afterwards only counts, per op and per place
(after chain, before chain), in the summary written when the run ends.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, Optional

FULL_STEPS = 2
FULL_LIMIT = 512
EVENT, SUMMARY = "collective", "collective_summary"

_TORCH_DIR = ""  # torch's folder, set when a watcher starts (the only time torch is imported here)
# Frames that are neither torch's nor the user's: thundervis (core and compiler) and the stdlib.
_NOT_USER: tuple = ()
# Frames of the c10d Python API, its logging wrapper and Dynamo's disable wrapper (around the
# watcher's own kernel): the caller that matters is above them.
_PASS_THROUGH = ("distributed/distributed_c10d.py", "distributed/c10d_logger.py", "_dynamo/")


def _ms(seconds: float) -> float:
    """Return ``seconds`` in milliseconds to the microsecond: a finer clock reading is noise, and its
    digits are most of what a rank's events cost once a group stores the rest once."""
    return round(seconds * 1e3, 3)


def collective_name(c10d_op: str) -> str:
    """Return the collective's usual name for a ``c10d`` op name (``_allgather_base_`` ->
    ``all_gather``, ``allreduce_coalesced_`` -> ``all_reduce_coalesced``)."""
    name = c10d_op.strip("_")
    for packed, spaced in (("allreduce", "all_reduce"), ("allgather", "all_gather"), ("alltoall", "all_to_all")):
        name = name.replace(packed, spaced)
    for noise in ("_base", "_into_tensor", "_tensor"):
        name = name.replace(noise, "")
    return name


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _tensors(value) -> list:
    """Return the tensors in a schema argument value (a tensor, a list, or a list of lists)."""
    import torch
    if isinstance(value, torch.Tensor):
        return [value]
    out = []
    if isinstance(value, (list, tuple)):
        for v in value:
            out.extend(_tensors(v))
    return out


class _OpInfo:
    """Where one ``c10d`` op's outputs, inputs (in-place ops: the same tensors) and process group
    are among its arguments, from its schema."""

    def __init__(self, op):
        self.name = op._schema.name.split("::")[-1]
        self.outputs, self.inputs, self.group = [], [], None
        for i, a in enumerate(op._schema.arguments):
            t = str(a.type)
            if "ProcessGroup" in t:
                self.group = i
            elif "Tensor" in t and a.name != "sparse_indices":
                if "output" in a.name:
                    self.outputs.append(i)
                elif "input" in a.name:
                    self.inputs.append(i)
                else:  # allreduce_, broadcast_, send, recv_, barrier: in place
                    self.outputs.append(i)
                    self.inputs.append(i)
        self.names = [a.name for a in op._schema.arguments]
        self.collective = collective_name(self.name)


def _frames() -> tuple[Optional[str], Optional[str]]:
    """Return (innermost torch frame that issued the collective, as ``torch/...py:LINE function``;
    the user's innermost source line ``file.py:LINE``) from the Python stack."""
    issuer = source = None
    f = sys._getframe(1)
    while f is not None and (issuer is None or source is None):
        path = f.f_code.co_filename
        if path.startswith(_TORCH_DIR):
            inside = path[len(_TORCH_DIR):].replace(os.sep, "/")
            if issuer is None and not inside.startswith(_PASS_THROUGH):
                issuer = f"torch/{inside}:{f.f_lineno} {f.f_code.co_name}"
        elif not path.startswith(_NOT_USER) and not path.startswith("<"):
            source = f"{os.path.basename(path)}:{f.f_lineno}"
            if issuer is None:
                issuer = "script"
        f = f.f_back
    return issuer, source


class CollectiveWatcher:
    """Watches ``c10d`` collectives and compiled chain calls; writes ``collective`` events through
    ``note(event, data)`` (the recording's). Use :meth:`start` and :meth:`stop` (or ``with``)."""

    def __init__(self, note: Callable[[str, Any], None], full_steps: int = FULL_STEPS,
                 full_limit: int = FULL_LIMIT):
        self._note = note
        self._full_steps, self._full_limit = full_steps, full_limit
        self._lock = threading.Lock()
        self._lib = None
        self._previous_listener = None
        self._calls: dict[tuple, int] = {}  # (graph, chain) -> calls so far
        self._chain_calls = 0               # calls of any chain so far
        self._running: list[tuple] = []     # chain calls in progress (graph, chain, call)
        self._last: Optional[tuple] = None  # the chain call that ended last
        self._first_chain: Optional[tuple] = None
        self._step = 0
        self._between = 0                   # collectives run between chains
        self._in_graphs: dict[tuple, int] = {}  # (graph, chain, op) -> runs while that chain ran
        self._by_op: dict[tuple, list] = {}     # (op, group size) -> [count, bytes]
        self._places: dict[tuple, list] = {}    # (after (g, c), before (g, c), op) -> [count, bytes]
        self._open: dict[tuple, list] = {}      # since the last chain call: (after, op) -> [count, bytes]
        self._unplaced: list[dict] = []     # recorded in full, waiting for the next chain call
        self._pending: list[dict] = []      # placed, waiting for their work to complete
        self._written = 0

    # -- lifetime -------------------------------------------------------------------------------

    def start(self) -> "CollectiveWatcher":
        """Register the ``c10d`` kernels and listen to chain calls; return self."""
        global _TORCH_DIR, _NOT_USER
        import sysconfig
        import torch
        from thundervis import compiler
        from thundervis.compiler import chain_calls
        from thundervis.compiler.source import TORCH_DIR as _TORCH_DIR
        _NOT_USER = tuple(os.path.dirname(os.path.abspath(m)) + os.sep for m in (__file__, compiler.__file__)) + \
            tuple(sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "platstdlib"))
        lib = torch.library.Library("c10d", "IMPL")
        try:
            for full in sorted(torch._C._dispatch_get_all_op_names()):
                ns, _, name = full.partition("::")
                if ns != "c10d" or not hasattr(torch.ops.c10d, name):
                    continue
                op = getattr(torch.ops.c10d, name).default
                info = _OpInfo(op)
                if info.group is None:  # check_for_nan and other helpers: no collective
                    continue
                lib.impl(name, self._kernel(op, info), "Autograd", with_keyset=True)
        except BaseException:
            lib._destroy()  # all or nothing: no kernel of a watcher that did not start stays
            raise
        self._lib = lib
        self._previous_listener = chain_calls.set_listener(self)
        return self

    def stop(self) -> None:
        """Unregister the kernels, stop listening, write what is left and the summary."""
        from thundervis.compiler import chain_calls
        if self._lib is None:
            return
        chain_calls.set_listener(self._previous_listener)
        self._lib._destroy()
        self._lib = None
        with self._lock:
            self._place(None)
            ready, self._pending = self._pending, []
        self._write(ready, wait_s=0.25)  # the last works' completion, briefly
        if self._between or self._in_graphs:
            self._note(SUMMARY, self.summary())

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- chain calls (thundervis.compiler.chain_calls) ---------------------------------------------

    def chain_started(self, graph: int, chain: str) -> None:
        """A compiled chain call begins: it is what the collectives since the last one ran before."""
        key = (graph, chain)
        with self._lock:
            self._chain_calls += 1
            n = self._calls[key] = self._calls.get(key, 0) + 1
            if self._first_chain is None:
                self._first_chain = key
            if key == self._first_chain:
                self._step += 1
            call = (graph, chain, n)
            self._running.append(call)
            if not (self._unplaced or self._pending or self._open):
                return
            self._place(call)
            # Written once complete, or after one more chain call without completing (a future
            # that never completes, as gloo's reduce-scatter's, must not hold the row back).
            waiting, ready = [], []
            for r in self._pending:
                done = "duration_ms" in r or r.get("done") or r["_placed"] < self._chain_calls
                (ready if done else waiting).append(r)
            self._pending = waiting
        self._write(ready)

    def chain_finished(self, graph: int, chain: str) -> None:
        """A compiled chain call ended."""
        with self._lock:
            for i in range(len(self._running) - 1, -1, -1):
                if self._running[i][:2] == (graph, chain):
                    self._last = self._running.pop(i)
                    break

    def _place(self, call: Optional[tuple]) -> None:
        """Give every collective since the last chain call ``call`` as the chain call after it
        (lock held)."""
        for r in self._unplaced:
            r["before"] = None if call is None else {"graph": call[0], "chain": call[1], "call": call[2]}
            r["_placed"] = self._chain_calls
            self._pending.append(r)
        self._unplaced = []
        before = None if call is None else call[:2]
        for (after, op), (n, nbytes) in self._open.items():
            count = self._places.setdefault((after, before, op), [0, 0])
            count[0] += n
            count[1] += nbytes
        self._open = {}

    # -- collectives ------------------------------------------------------------------------------

    def _kernel(self, op, info: _OpInfo):
        import torch
        # Exactly what torch's own autograd fallback for these ops does: run the op below
        # ADInplaceOrView, with autograd excluded for whatever the kernel calls.
        below = torch._C._after_ADInplaceOrView_keyset
        below_guard = torch._C._AutoDispatchBelowADInplaceOrView
        plain = torch.Tensor

        def kernel(keyset, *args, **kwargs):
            try:
                record = self._seen(info, args, kwargs, plain)
            except Exception:  # the watcher never breaks the user's training
                record = None
            started = time.perf_counter()
            with below_guard():
                out = op.redispatch(keyset & below, *args, **kwargs)
            if record is not None:
                self._on_completion(record, out, started)
            return out
        # Dynamo compiles every new Python frame that eager code calls while a compiled function
        # runs (after a graph break): the kernel is ours, never the user's, so it is skipped.
        return torch._dynamo.disable(kernel, recursive=True, reason="thundervis collective watcher")

    def _seen(self, info: _OpInfo, args: tuple, kwargs: dict, plain) -> Optional[dict]:
        """Count one collective; return its record when it is recorded in full, else None."""
        values = dict(zip(info.names, args))
        if kwargs:
            values.update(kwargs)
        outputs = [t for i in info.outputs for t in _tensors(values.get(info.names[i]))]
        inputs = outputs if info.inputs == info.outputs else \
            [t for i in info.inputs for t in _tensors(values.get(info.names[i]))]
        if any(type(t) is not plain or t.is_meta for t in outputs + inputs):
            return None  # traced under fake or functional tensors: nothing is communicated
        name = info.collective
        group = self._group(values.get(info.names[info.group]))
        size = group[0] if group else None
        nbytes = max(sum(t.nbytes for t in outputs), sum(t.nbytes for t in inputs))
        with self._lock:
            if self._running:
                g, c, _ = self._running[-1]
                key = (g, c, name)
                self._in_graphs[key] = self._in_graphs.get(key, 0) + 1
                return None
            self._between += 1
            count = self._by_op.setdefault((name, size), [0, 0])
            count[0] += 1
            count[1] += nbytes
            after = self._last[:2] if self._last else None
            full = self._step <= self._full_steps and self._written + len(self._unplaced) + len(self._pending) \
                < self._full_limit
            record = None
            if full:
                record = {"seq": self._between - 1, "op": name, "c10d_op": info.name,
                          "group_size": size, "group": group[1] if group else None,
                          "backend": group[2] if group else None,
                          "inputs": [[list(t.shape), _dtype_name(t.dtype)] for t in inputs],
                          "outputs": [[list(t.shape), _dtype_name(t.dtype)] for t in outputs],
                          "bytes": nbytes, "async": bool(values.get("async_op", True)), "step": self._step,
                          "after": None if self._last is None else
                          {"graph": self._last[0], "chain": self._last[1], "call": self._last[2]}}
                self._unplaced.append(record)
            place = self._open.setdefault((after, name), [0, 0])
            place[0] += 1
            place[1] += nbytes
        if record is not None:
            record["issuer"], record["source"] = _frames()
        return record

    def _group(self, boxed) -> Optional[tuple]:
        """Return (size, name, backend) of a process group argument, None when unreadable."""
        try:
            from torch._C._distributed_c10d import ProcessGroup
            pg = ProcessGroup.unbox(boxed)
            return pg.size(), str(pg.group_name), str(pg.name())
        except Exception:
            return None

    def _on_completion(self, record: dict, out, started: float) -> None:
        """Time ``record``'s collective from issue to completion through its work's future."""
        try:
            from torch._C._distributed_c10d import Work
            work = out[1] if isinstance(out, tuple) else out
            work = Work.unbox(work) if not isinstance(work, Work) else work
            record["issue_ms"] = _ms(time.perf_counter() - started)

            def done(_fut):
                record["duration_ms"] = _ms(time.perf_counter() - started)
            work.get_future().then(done)
        except Exception:  # no future (some backends): recorded without a duration
            record["done"] = True

    def _write(self, records: list, wait_s: float = 0.0) -> None:
        deadline = time.perf_counter() + wait_s
        for r in records:
            while "duration_ms" not in r and not r.get("done") and time.perf_counter() < deadline:
                time.sleep(0.001)
            data = {k: v for k, v in r.items() if k not in ("done", "_placed")}
            data.setdefault("duration_ms", None)
            try:
                self._note(EVENT, data)
            except Exception:
                pass
            self._written += 1

    # -- counts -----------------------------------------------------------------------------------

    def summary(self) -> dict:
        """Return the ``collective_summary`` event's data: collectives run between chains (total,
        recorded in full, per op and group size with bytes, per place), those run inside chains
        (per graph, chain and op), the steps seen and the limits used."""
        with self._lock:
            return {
                "between_graphs": self._between, "recorded": self._written,
                "steps": self._step, "full_steps": self._full_steps, "full_limit": self._full_limit,
                "by_op": [{"op": op, "group_size": size, "count": c, "bytes": b}
                          for (op, size), (c, b) in sorted(self._by_op.items(), key=lambda kv: str(kv[0]))],
                "places": [{"after": None if a is None else {"graph": a[0], "chain": a[1]},
                            "before": None if b is None else {"graph": b[0], "chain": b[1]},
                            "op": op, "count": c, "bytes": n}
                           for (a, b, op), (c, n) in sorted(self._places.items(), key=lambda kv: str(kv[0]))],
                "in_graphs": [{"graph": g, "chain": c, "op": op, "count": n}
                              for (g, c, op), n in sorted(self._in_graphs.items())],
            }
