"""Scaling out with torchrun: the process group, DDP wrapping, per-rank seeds and shards, reductions across ranks.

Launch any entry point of the course with torchrun, for example on one node with 4 GPUs:
    torchrun --standalone --nproc_per_node 4 -m helpers.course.train cifar --profile full
and on 2 nodes (run on each node, with its own --node_rank):
    torchrun --nnodes 2 --node_rank 0 --nproc_per_node 4 --rdzv_backend c10d --rdzv_endpoint HOST:29500 \\
        -m helpers.course.train cifar --profile full

Example:
    >>> context = init_distributed()  # without torchrun: one process, no process group
    >>> context.world_size, context.is_main, all_reduce_sum([1.0, 2.0], context)
    (1, True, [1.0, 2.0])
    >>> model = torch.nn.Linear(2, 2)
    >>> unwrap_model(wrap_model(model, context)) is model, shard_range(10, DistributedContext(rank=1, world_size=4))
    (True, slice(3, 6, None))

Copy alone.
Needs: torch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class DistributedContext:
    """Where this process stands: its rank among `world_size` processes, its local rank on the node, its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        """True on rank 0, the only rank that writes checkpoints, history and logs."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        """True when more than one process takes part."""
        return self.world_size > 1


def init_distributed(backend: str | None = None) -> DistributedContext:
    """Join the process group torchrun describes (RANK, WORLD_SIZE, LOCAL_RANK); a single process otherwise.

    NCCL on CUDA (one GPU per local rank), gloo on CPU.
    """
    if "WORLD_SIZE" not in os.environ or int(os.environ["WORLD_SIZE"]) == 1:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return DistributedContext(device=device)
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if not dist.is_initialized():
        if device.type == "cuda":  # device_id binds NCCL's communicator to this rank's GPU at once
            dist.init_process_group(backend or "nccl", device_id=device)
        else:
            dist.init_process_group(backend or "gloo")
    return DistributedContext(rank, world_size, local_rank, device)


@contextmanager
def local_main_first(context: DistributedContext) -> Iterator[None]:
    """Run the block on each node's local rank 0 first (downloads, data preparation, caches), then on the others."""
    if context.enabled and context.local_rank != 0:
        dist.barrier()
    yield
    if context.enabled and context.local_rank == 0:
        dist.barrier()


def cleanup_distributed(*, failed: bool = False) -> None:
    """Leave the process group, if this process joined one: after a barrier when the run ended normally (so no rank
    tears down its connections while another is still finishing a collective); with `failed` (the run raised: a
    non-finite loss, out of memory, Ctrl-C) at once, with no barrier, which would pair with a peer's all-reduce and
    hang both. The peers' next collective then fails (gloo at once; NCCL when torchrun stops them, or at its
    timeout), so every rank exits instead of waiting.

    Call it from a `finally` that knows whether the run failed::

        failed = True
        try:
            train(...)
            failed = False
        finally:
            cleanup_distributed(failed=failed)
    """
    if dist.is_available() and dist.is_initialized():
        if not failed:
            dist.barrier()
        dist.destroy_process_group()


def wrap_model(model: nn.Module, context: DistributedContext) -> nn.Module:
    """DistributedDataParallel around `model` when several processes take part; the model itself otherwise."""
    if not context.enabled:
        return model
    device_ids = [context.device.index] if context.device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)


def unwrap_model(model: nn.Module) -> nn.Module:
    """The module inside a DDP wrapper (what checkpoints and evaluation should see)."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


def all_reduce_sum(values: list[float], context: DistributedContext) -> list[float]:
    """Sum a few numbers over all ranks (identity for a single process)."""
    if not context.enabled:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=context.device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


def shard_range(count: int, context: DistributedContext) -> slice:
    """This rank's contiguous share of `count` items (for evaluation sets)."""
    per_rank = -(-count // context.world_size)
    start = min(count, context.rank * per_rank)
    return slice(start, min(count, start + per_rank))
