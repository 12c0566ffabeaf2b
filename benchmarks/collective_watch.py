"""Overhead of the collective watcher (``thundervis/collective_watch.py``) on one gloo rank.

Times ``--n`` small ``dist.all_reduce`` calls without the watcher, with it while it lists every
collective (the first steps) and with it once it only counts (later steps), and ``--n`` pairs of
compiled-chain call announcements (``compiler.chain_calls``) with and without a listener. Prints
the per-call cost of each (microseconds, best of 5 repeats) and the watcher's overhead.
"""
from __future__ import annotations

import argparse
import time


def _per_call_us(fn, n: int, repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return min(samples)  # the least disturbed repeat: the machine may be shared


def main() -> None:
    """Run the measurements and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args()
    import torch
    import torch.distributed as dist
    from thundervis.collective_watch import CollectiveWatcher
    from thundervis.compiler import chain_calls
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    t = torch.ones(16)

    def all_reduce():
        dist.all_reduce(t)

    def announce():
        chain_calls.started(0, "forward")
        chain_calls.finished(0, "forward")

    bare = _per_call_us(all_reduce, args.n)
    bare_chain = _per_call_us(announce, args.n)
    notes = []
    listing = CollectiveWatcher(lambda e, d: notes.append((e, d)), full_limit=10 ** 9).start()
    listed = _per_call_us(all_reduce, args.n)
    listing.stop()
    counting = CollectiveWatcher(lambda e, d: notes.append((e, d)), full_steps=-1).start()
    counted = _per_call_us(all_reduce, args.n)
    watched_chain = _per_call_us(announce, args.n)
    counting.stop()
    dist.destroy_process_group()
    print(f"all_reduce f32[16], gloo, 1 rank: {bare:.1f} us bare · {listed:.1f} us listed one by one "
          f"(+{listed - bare:.1f}) · {counted:.1f} us counted (+{counted - bare:.1f})")
    print(f"chain call announcement pair: {bare_chain:.2f} us without listener · {watched_chain:.2f} us "
          f"with the watcher (+{watched_chain - bare_chain:.2f})")


if __name__ == "__main__":
    main()
