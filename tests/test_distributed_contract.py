"""The distributed helpers' small contracts, without spawning processes: shards cover every item once, who is main,
when DDP is on, the ranks read from torchrun's variables, local rank 0 goes first, and DDP is unwrapped."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn

import helpers.distributed as distributed_module
from helpers.distributed import DistributedContext, init_distributed, local_main_first, shard_range, unwrap_model


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_shards_cover_every_item_once_in_order(world_size):
    for count in range(12):
        shards = [shard_range(count, DistributedContext(rank, world_size)) for rank in range(world_size)]
        assert [i for share in shards for i in range(count)[share]] == list(range(count))
        assert max(len(range(count)[share]) for share in shards) == -(-count // world_size)


def test_only_global_rank_0_is_main_and_only_several_processes_enable_ddp():
    assert DistributedContext().is_main and not DistributedContext().enabled
    second_node_first_gpu = DistributedContext(rank=4, world_size=8, local_rank=0)
    assert not second_node_first_gpu.is_main and second_node_first_gpu.enabled


def test_torchrun_s_variables_give_rank_world_size_and_local_rank(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(distributed_module.dist, "is_initialized", lambda: True)  # as if joined already
    context = init_distributed()
    assert (context.rank, context.world_size, context.local_rank) == (5, 8, 1)


@pytest.mark.parametrize("cuda", [True, False])
def test_the_process_group_is_bound_to_the_rank_s_gpu(monkeypatch, cuda):
    """NCCL gets device_id= (the communicator bound to this rank's GPU at once); gloo on the CPU gets none."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "set_device", lambda index: None)
    monkeypatch.setattr(distributed_module.dist, "is_initialized", lambda: False)
    joined: list[tuple] = []
    monkeypatch.setattr(distributed_module.dist, "init_process_group", lambda *a, **k: joined.append((a, k)))
    context = init_distributed()
    if cuda:
        assert joined == [(("nccl",), {"device_id": torch.device("cuda", 1)})] and context.device == torch.device(
            "cuda", 1
        )
    else:
        assert joined == [(("gloo",), {})]


@pytest.mark.parametrize("failed", [False, True])
def test_leaving_the_group_barriers_only_after_a_run_that_ended_normally(monkeypatch, failed):
    events: list[str] = []
    monkeypatch.setattr(distributed_module.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(distributed_module.dist, "barrier", lambda: events.append("barrier"))
    monkeypatch.setattr(distributed_module.dist, "destroy_process_group", lambda: events.append("destroy"))
    distributed_module.cleanup_distributed(failed=failed)
    assert events == (["destroy"] if failed else ["barrier", "destroy"])


@pytest.mark.parametrize(("local_rank", "expected"), [(0, ["work", "barrier"]), (1, ["barrier", "work"])])
def test_local_rank_0_works_first_and_the_others_wait_for_it(monkeypatch, local_rank, expected):
    events: list[str] = []
    monkeypatch.setattr(distributed_module.dist, "barrier", lambda: events.append("barrier"))
    with local_main_first(DistributedContext(rank=local_rank, world_size=2, local_rank=local_rank)):
        events.append("work")
    assert events == expected


def test_unwrap_model_returns_the_module_inside_ddp(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        inner = nn.Linear(2, 1)
        assert unwrap_model(nn.parallel.DistributedDataParallel(inner)) is inner
        assert unwrap_model(inner) is inner
    finally:
        dist.destroy_process_group()
