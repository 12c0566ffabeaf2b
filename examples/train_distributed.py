"""Train the example MLP data-parallel on several processes: DDP or FSDP2 (``fully_shard``).

Launch it like any torchrun script: ``torchrun --nproc-per-node 2 examples/train_distributed.py``,
or recorded, one recording per rank: ``thundervis run --nproc-per-node 2 examples/train_distributed.py``.
``--mode ddp`` (default) wraps the model in ``DistributedDataParallel``; ``--mode fsdp`` shards it
with ``fully_shard`` (FSDP2). DDP's gradient all-reduces (unless ``--compiled-autograd``) and
FSDP2's all-gathers and reduce-scatters run between the compiled graphs (torch 2.13 keeps FSDP2's
hooks out of Dynamo); ``thundervis run`` records them there (docs/distributed.md). Each rank trains on its own slice of every batch; rank 0 prints ``step N loss X.XXXXXX``
(the loss averaged over ranks, so it matches a single-process run on the whole batch) and, with
``--losses FILE``, writes the list of losses as JSON. Backend: gloo on CPU, nccl on CUDA.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from typing import Optional, Sequence

import torch
import torch._dynamo
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_mlp import build  # noqa: E402


def wrap(model: torch.nn.Module, mode: str, device: torch.device) -> torch.nn.Module:
    """Return ``model`` wrapped for data parallelism (``ddp``, ``fsdp``) or as is (``none``)."""
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    if mode == "fsdp":
        from torch.distributed.fsdp import fully_shard
        for layer in (model.fc1, model.fc2, model.fc3):
            fully_shard(layer)
        fully_shard(model)
        return model
    return model


class _no_context:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse the command line, train on every rank, print rank 0's losses; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("ddp", "fsdp"), default="ddp")
    parser.add_argument("--steps", type=int, default=3, help="training steps (default 3)")
    parser.add_argument("--eager", action="store_true", help="run without torch.compile")
    parser.add_argument("--compiled-autograd", action="store_true",
                        help="compile the backward with compiled autograd (DDP: its gradient all-reduces "
                             "are traced into the backward graph, python_reducer)")
    parser.add_argument("--losses", default=None, help="write rank 0's losses to this JSON file")
    parser.add_argument("--stall-rank", type=int, default=None,
                        help="this rank waits forever after its first step (for kill tests)")
    parser.add_argument("--ready", default=None, help="with --stall-rank: touch this file once stalled")
    args = parser.parse_args(argv)

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    model, batches = build(seed=0)
    if args.compiled_autograd and not args.eager:
        # DDP's gradient all-reduces go into the compiled backward graph (DDP reads this at wrap time).
        torch._dynamo.config.optimize_ddp = "python_reducer"
    model = wrap(model.to(device), args.mode, device)
    run = model if args.eager else torch.compile(model)
    backward_context = _no_context
    if args.compiled_autograd and not args.eager:
        import torch._dynamo.compiled_autograd as ca
        backward_context = lambda: ca._enable(lambda gm: torch.compile(gm))  # noqa: E731
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(args.steps):
        x, y = batches[step % len(batches)]
        shard = x.shape[0] // world
        x, y = x[rank * shard:(rank + 1) * shard].to(device), y[rank * shard:(rank + 1) * shard].to(device)
        loss = F.cross_entropy(run(x), y)
        opt.zero_grad(set_to_none=True)
        with backward_context():
            loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / world)
        if rank == 0:
            print(f"step {step} loss {losses[-1]:.6f}", flush=True)
        if args.stall_rank == rank:
            if args.ready:
                open(args.ready, "w").close()
            import time
            while True:
                time.sleep(1)
    if rank == 0 and args.losses:
        with open(args.losses, "w") as f:
            json.dump(losses, f)
    dist.barrier()  # no rank tears the group down while another still talks to it
    # Free DDP (its C++ reducer holds the last reference to the gloo process group) while the group is
    # still up: when the reducer is freed with main()'s frame instead, ProcessGroupGloo's destructor
    # waits, holding the GIL, for a gloo thread that needs the GIL to free a finished work's tensor,
    # and the process hangs at exit (pytorch#56297's class of bug; seen in about 1 run in 7).
    del run, model, opt
    gc.collect()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
