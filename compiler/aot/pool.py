"""Ahead-of-time compilation while the user's script runs: :class:`AheadOfTime`.

The compiler hands it every chain's kernel records as the fuse pass builds them
(:meth:`AheadOfTime.submit`). Each Triton kernel is planned for the GPU targets in this process
(:mod:`.plan`), deduplicated by its compiled text (identical layers share one build) and compiled
once per target in spawned worker processes (:mod:`.worker`); each finished build (or failure) is
reported to the compile observer's ``kernel_compiled`` as soon as it arrives. :meth:`finish` waits
for what is pending, at most a bounded time, reports what did not finish as ``unfinished`` and stops
the workers. Nothing here ever raises into the user's run.
"""
from __future__ import annotations

import atexit
import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import sys
import threading
import time
import types
from typing import Optional, Sequence

from ..ir import KernelRecord
from ..observer import CompileObserver
from .targets import occupancy, target_name

DEFAULT_WAIT_S = 300.0
# Test-only: extra ptxas options for every build (a bad one makes ptxas reject every kernel).
PTXAS_TEST_HOOK = "THUNDERVIS_AOT_TEST_PTXAS_OPTIONS"


def default_workers() -> int:
    """Return how many compile workers to start: ``$THUNDERVIS_AOT_WORKERS``, or one per core this
    process may use, 1 to 8: they run at a lower priority than the script (``worker.DEFAULT_NICE``),
    so they take what it leaves, and every core once it has ended (measured on 2 cores: the wait for
    the example's builds at the end went from 8.5 s with one worker to 6.5 s with two)."""
    env = os.environ.get("THUNDERVIS_AOT_WORKERS", "")
    if env.isdigit() and int(env) > 0:
        return min(int(env), 32)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 2
    return max(1, min(8, cores))


def default_wait_s() -> float:
    """Return how long :meth:`AheadOfTime.finish` waits: ``$THUNDERVIS_AOT_WAIT_S`` or 300 s."""
    try:
        return max(0.0, float(os.environ.get("THUNDERVIS_AOT_WAIT_S", DEFAULT_WAIT_S)))
    except ValueError:
        return DEFAULT_WAIT_S


@contextlib.contextmanager
def _plain_main():
    """While workers are spawned, ``__main__`` is a bare module: a spawned child re-imports the
    parent's main module, which during ``thundervis run`` is the user's script."""
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


class AheadOfTime:
    """Compiles every distinct Triton kernel for ``targets`` (capabilities, e.g. ``(80, 90)``) in
    worker processes and reports each build to ``observer.kernel_compiled``."""

    def __init__(self, targets: Sequence[int], observer: Optional[CompileObserver] = None,
                 workers: Optional[int] = None):
        self.targets = tuple(targets)
        self.observer = observer or CompileObserver()
        self.workers = workers or default_workers()
        self._pool: Optional[cf.ProcessPoolExecutor] = None
        self._lock = threading.Lock()
        self._futures: dict[tuple[str, int], cf.Future] = {}  # build -> the future of its batch
        self._index: dict[tuple[str, int], int] = {}  # build -> its place in that batch's results
        self._inflight = 0  # reports being written (a future's callbacks run after its waiters wake)
        self._idle = threading.Condition(self._lock)
        self._waiting: dict[tuple[str, int], list[tuple]] = {}  # build -> [(graph, chain, name, plan)]
        self._reported: set = set()
        self._closed = False
        self.started_at = time.perf_counter()
        self._handed: tuple[float, ...] = ()  # when the first and the latest batch went to the workers
        self.stats = {"kernels": 0, "distinct": 0, "builds": 0, "failed": 0, "unfinished": 0}
        atexit.register(self._stop_workers)

    # ------------------------------------------------------------------ workers
    def start(self) -> None:
        """Spawn the workers now, before the user's script runs; each imports Triton and pays its
        first build's set-up on a small kernel (:func:`.worker.warm_up`)."""
        if not self.targets or self._closed:
            return
        pool = self._ensure_pool()
        if pool is not None:
            with _plain_main():
                for _ in range(self.workers):
                    pool.submit(_warm, self.targets)

    def _ensure_pool(self) -> Optional[cf.ProcessPoolExecutor]:
        if self._pool is None and not self._closed:
            from .worker import prepare_worker
            ctx = multiprocessing.get_context("spawn")
            self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=prepare_worker)
        return self._pool

    # ------------------------------------------------------------------ submitting
    def submit(self, graph: int, chain: str, records: Sequence[KernelRecord]) -> None:
        """Plan and queue the Triton kernels among ``records`` for every target (never raises). The
        new builds of one call (a chain's kernels) go to the workers in batches, one per worker and
        target at most: a batch's functions share one disassembly (:func:`.worker.compile_jobs`)."""
        if not self.targets or self._closed:
            return
        new: dict[int, list] = {}  # arch -> [(key, job)] not submitted before
        for r in records:
            if getattr(r, "executor", None) != "triton":
                continue
            try:
                self._submit_one(graph, chain, r, new)
            except Exception as e:  # noqa: BLE001 - planning a target must not break the run
                self._report_all(graph, chain, r.name, None, "unplanned", f"{type(e).__name__}: {e}")
        for jobs in new.values():
            for part in balanced_batches(jobs, self.workers):
                self._dispatch(part)

    def _submit_one(self, graph: int, chain: str, record: KernelRecord, new: dict) -> None:
        from ..executors.triton_codegen import Unfusable
        from .plan import job, plan_for_gpu
        self.stats["kernels"] += 1
        try:
            plan = plan_for_gpu(record)
        except Unfusable as e:
            self._report_all(graph, chain, record.name, None, "unplanned", f"no GPU plan: {e}")
            return
        hook = os.environ.get(PTXAS_TEST_HOOK, "")
        for arch in self.targets:
            key = (plan.build_key, arch)
            with self._lock:
                self._waiting.setdefault(key, []).append((graph, chain, record.name, plan))
                fut = self._futures.get(key)
                if fut is None and any(k == key for k, _ in new.get(arch, ())):
                    continue  # reported with the build this call queues
                if fut is None:
                    self.stats["distinct"] += 1 if arch == self.targets[0] else 0
            if fut is not None:  # queued by an earlier call, perhaps done: report this kernel too
                fut.add_done_callback(lambda f, key=key: self._done(key, f, self._index[key]))
                continue
            new.setdefault(arch, []).append((key, job(plan, arch, hook)))

    def _dispatch(self, batch: list) -> None:
        """Send ``batch`` ([(key, job)], one target) to a worker; each key's build is reported as
        soon as the batch is done."""
        with self._lock:
            now = time.perf_counter()
            self._handed = (self._handed[0] if self._handed else now, now)
            try:
                with _plain_main():
                    fut = self._ensure_pool().submit(_compile_batch, [j for _, j in batch])
            except Exception as e:  # noqa: BLE001 - no worker to take it: each build is a failure
                fut = cf.Future()
                fut.set_exception(e)
            for i, (key, _) in enumerate(batch):
                self._futures[key], self._index[key] = fut, i
        for i, (key, _) in enumerate(batch):
            fut.add_done_callback(lambda f, key=key, i=i: self._done(key, f, i))

    # ------------------------------------------------------------------ results
    def _done(self, key: tuple[str, int], fut: cf.Future, index: int = 0) -> None:
        if fut.cancelled():
            return
        try:
            result = fut.result()[index]
        except Exception as e:  # noqa: BLE001 - a dead worker is a failed build
            result = {"ok": False, "error": f"the compile worker failed ({type(e).__name__}: {e})"}
        with self._lock:
            waiting = self._waiting.get(key, [])
            todo = [w for w in waiting if (w[0], w[1], w[2], key[1]) not in self._reported]
            for w in todo:
                self._reported.add((w[0], w[1], w[2], key[1]))
            self._inflight += 1
        try:
            for graph, chain, name, plan in todo:
                self._report(graph, chain, name, key[1], plan, result)
        finally:
            with self._lock:
                self._inflight -= 1
                self._idle.notify_all()

    def _report(self, graph, chain, name, arch, plan, result: dict) -> None:
        build = _build_record(arch, plan, result)
        if build["status"] == "ok":
            self.stats["builds"] += 1
        else:
            self.stats["failed" if build["status"] == "failed" else "unfinished"] += 1
        try:
            self.observer.kernel_compiled(graph, chain, name, target_name(arch), build)
        except Exception:  # recording is best effort
            pass

    def _report_all(self, graph, chain, name, plan, status: str, error: str) -> None:
        for arch in self.targets:
            with self._lock:
                if (graph, chain, name, arch) in self._reported:
                    continue
                self._reported.add((graph, chain, name, arch))
            self._report(graph, chain, name, arch, plan, {"ok": False, "status": status, "error": error})

    def pending(self) -> int:
        """Return how many builds are not finished yet."""
        with self._lock:
            return sum(1 for f in self._futures.values() if not f.done())

    def finish(self, wait_s: Optional[float] = None) -> dict:
        """Wait up to ``wait_s`` seconds (default :func:`default_wait_s`) for pending builds, report
        the rest as unfinished, stop the workers; return the counts (kernels, distinct, builds,
        failed, unfinished, seconds since start; ``pending_at_end``: distinct builds not finished
        when this was called, ``waited_s``: how long it waited for them; ``handed_s``: when the
        first and the last batch went to the workers, and ``finish_called_s``: when the run asked
        to finish (the script's end), seconds since start: the timeline the wait comes from)."""
        if self._closed:
            return dict(self.stats)
        wait_s = default_wait_s() if wait_s is None else wait_s
        with self._lock:
            futures = list(self._futures.values())
        if wait_s > 0 and any(not f.done() for f in futures):
            self._raise_workers()
        t0 = time.perf_counter()
        with self._lock:
            handed = [round(t - self.started_at, 3) for t in self._handed]
        pending_at_end = sum(1 for f in futures if not f.done())
        if futures:
            cf.wait(futures, timeout=wait_s)
        with self._lock:
            done = [(k, f) for k, f in self._futures.items() if f.done()]
        for key, fut in done:  # report here what the callbacks have not reported yet
            self._done(key, fut, self._index.get(key, 0))
        with self._lock:  # and let the callbacks writing a report finish it
            self._idle.wait_for(lambda: self._inflight == 0, timeout=60)
        waited = time.perf_counter() - t0
        self._closed = True
        with self._lock:
            late = [(k, w) for k, ws in self._waiting.items() if not self._futures[k].done() for w in ws]
        for (key, arch), (graph, chain, name, plan) in late:
            with self._lock:
                if (graph, chain, name, arch) in self._reported:
                    continue
                self._reported.add((graph, chain, name, arch))
            self._report(graph, chain, name, arch, plan,
                         {"ok": False, "status": "unfinished",
                          "error": f"not finished when the run ended (waited {wait_s:g} s)"})
        self._stop_workers()
        out = dict(self.stats)
        out["seconds"] = round(time.perf_counter() - self.started_at, 3)
        out.update(pending_at_end=pending_at_end, waited_s=round(waited, 3), handed_s=handed,
                   finish_called_s=round(t0 - self.started_at, 3))
        return out

    def _raise_workers(self) -> None:
        """Give the workers this process's priority back: they yield to the user's script while it
        runs, but once it has ended the run waits only for them (on a machine shared with other
        people, a nice-10 worker gets a tenth of a core against their programs). Linux lets only a
        privileged user raise a priority; elsewhere they stay as they are."""
        procs = list((getattr(self._pool, "_processes", None) or {}).values())
        with contextlib.suppress(OSError, AttributeError):
            mine = os.getpriority(os.PRIO_PROCESS, 0)
            for p in procs:
                with contextlib.suppress(OSError, AttributeError, ValueError):
                    os.setpriority(os.PRIO_PROCESS, p.pid, mine)

    def _stop_workers(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:  # our own workers: a build still running is abandoned
            with contextlib.suppress(Exception):
                if p.is_alive():
                    p.terminate()
        for p in procs:
            with contextlib.suppress(Exception):
                p.join(timeout=5)


def build_cost(job: dict) -> int:
    """A job's build cost in rough units: its source's length plus a small part per function
    (measured on the example's 15 kernels: Triton's CPU time is about 0.1 ms per character of
    source, within 30%; ptxas and the disassembly add a little per function)."""
    return len(job["source"]) + 100 * len(job["kernels"])


def balanced_batches(jobs: list, workers: int) -> list[list]:
    """Split ``jobs`` ([(key, job)]) into at most ``workers`` batches of about equal
    :func:`build_cost`, largest first into the lightest batch (the run waits for the slowest
    batch; dealing them out in turn gave 9 and 17 functions to the example's two backward
    batches); every batch keeps the jobs' order."""
    n = max(1, min(workers, len(jobs)))
    bins: list[list] = [[] for _ in range(n)]
    load = [0] * n
    for i in sorted(range(len(jobs)), key=lambda i: -build_cost(jobs[i][1])):
        b = load.index(min(load))
        bins[b].append(i)
        load[b] += build_cost(jobs[i][1])
    return [[jobs[i] for i in sorted(b)] for b in bins if b]


def _warm(targets=()) -> None:
    """Import Triton's CUDA backend in a worker and warm it up for ``targets`` before the first
    build needs it."""
    from .worker import warm_up
    warm_up(targets)


def _compile_batch(jobs: list) -> list:
    from .worker import compile_jobs
    return compile_jobs(jobs)


def _build_record(arch: int, plan, result: dict) -> dict:
    """Return what the observer records for one kernel and target."""
    status = "ok" if result.get("ok") else result.get("status", "failed")
    out = {"target": target_name(arch), "status": status, "error": result.get("error"),
           "seconds": result.get("seconds"), "build_key": plan.build_key if plan is not None else None}
    if plan is not None:
        ks = plan.kernel
        out["plan"] = {"plan": ks.plan, "grid": ks.grid, "parts": ks.parts,
                       "kernels": [{"name": k.name, "grid": k.grid, "num_warps": k.num_warps} for k in ks.kernels]}
        out["line_uids"] = {str(k): v for k, v in plan.line_uids.items()}
        out["members"] = plan.members
        out["source"] = ks.jit_source
    if status == "ok":
        res = dict(result["resources"])
        occ = occupancy(arch, res["registers"], res["shared_bytes"], res["num_warps"])
        out.update(resources=res, occupancy=occ, mix=result.get("mix"), functions=result.get("functions"),
                   stages=result.get("stages"), lines=result.get("lines"), triton=result.get("triton"))
    return out
