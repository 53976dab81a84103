"""DDP on CPU with gloo: 2 ranks see disjoint shards and different augmentations, hold identical parameters after
each step, and match one process on the combined batch; with gradient accumulation (4 over 7 micro-batches) they
all-reduce once per optimizer step, a short last group included, and still match one process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import helpers.distributed as distributed_module
from helpers.augment import cifar_train_augment
from helpers.course import recipe_run
from helpers.distributed import (
    DistributedContext,
    all_reduce_sum,
    init_distributed,
    local_main_first,
    shard_range,
    unwrap_model,
    wrap_model,
)
from helpers.loading import DeviceTensorLoader
from helpers.seeding import rank_seed
from helpers.step import TrainStep

STEPS, PER_RANK_BATCH, SAMPLES = 3, 4, 24


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(16, 10)
    )


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    one = torch.arange(3 * 32 * 32).reshape(1, 3, 32, 32) % 256
    return one.repeat(SAMPLES, 1, 1, 1).to(torch.uint8), torch.arange(SAMPLES) % 10  # identical images


def _worker(rank: int, world_size: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    context = DistributedContext(rank, world_size, 0, torch.device("cpu"))
    model = wrap_model(_model(), context)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    torch.manual_seed(rank_seed(0, rank))  # then per-rank augmentation draws
    images, labels = _data()
    index_labels = torch.arange(SAMPLES)  # labels that name the sample, to check the shards
    loader = DeviceTensorLoader(
        images,
        index_labels,
        batch_size=PER_RANK_BATCH,
        augment=cifar_train_augment(),
        seed=7,
        rank=rank,
        world_size=world_size,
        drop_last=True,
    )
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), device="cpu")
    record = {"indices": [], "inputs": [], "params": []}
    for number, (batch, index) in enumerate(loader):
        if number == STEPS:
            break
        step(batch, labels[index])
        record["indices"].append(index.clone())
        record["inputs"].append(batch.clone())
        record["params"].append([p.detach().clone() for p in model.parameters()])
    record["summed"] = all_reduce_sum([rank + 1.0, 10.0 * rank], context)  # what the epoch's loss totals use
    torch.save(record, Path(out_dir) / f"rank{rank}.pt")
    dist.destroy_process_group()


def _spawn_two_ranks(worker, folder: Path) -> list[dict]:
    """Run `worker(rank, 2, init_file, out_dir)` on two gloo ranks; return each rank's saved record."""
    mp.spawn(worker, args=(2, str(folder / "init"), str(folder)), nprocs=2, join=True)
    return [torch.load(folder / f"rank{r}.pt", weights_only=True) for r in range(2)]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    return _spawn_two_ranks(_worker, tmp_path_factory.mktemp("ddp"))


def test_a_sum_over_ranks_is_the_sum_on_every_rank(two_ranks):
    assert [r["summed"] for r in two_ranks] == [[3.0, 10.0], [3.0, 10.0]]  # (1 + 2, 0 + 10): summed, not averaged


def test_ranks_see_disjoint_shards(two_ranks):
    for step in range(STEPS):
        first, second = (set(r["indices"][step].tolist()) for r in two_ranks)
        assert not first & second
    everything = [i for r in two_ranks for batch in r["indices"] for i in batch.tolist()]
    assert len(everything) == len(set(everything))  # nobody sees a sample twice in the epoch


def test_ranks_draw_different_augmentations(two_ranks):
    # every image is the same picture, so any difference between the ranks' batches is augmentation
    assert not torch.equal(two_ranks[0]["inputs"][0], two_ranks[1]["inputs"][0])


def test_parameters_stay_identical_across_ranks(two_ranks):
    for step in range(STEPS):
        for a, b in zip(two_ranks[0]["params"][step], two_ranks[1]["params"][step]):
            torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_ddp_matches_one_process_on_the_combined_batch(two_ranks):
    _, labels = _data()
    model = _model()
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), device="cpu")
    for number in range(STEPS):
        inputs = torch.cat([r["inputs"][number] for r in two_ranks])
        targets = torch.cat([labels[r["indices"][number]] for r in two_ranks])
        step(inputs, targets)
        for mine, theirs in zip(model.parameters(), two_ranks[0]["params"][number]):
            torch.testing.assert_close(mine.detach(), theirs, atol=1e-6, rtol=1e-5)


ACCUMULATION, MICRO_BATCHES = 4, 7  # a full group of 4, then a short group of 3


def _micro_batches(rank: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    return [
        (torch.randn(3, 6, generator=generator), torch.randn(3, 2, generator=generator)) for _ in range(MICRO_BATCHES)
    ]


def _small_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))  # one DDP bucket: one all-reduce per backward


def _counting_hook(counter: dict, bucket):
    counter["all_reduces"] += 1
    return default_hooks.allreduce_hook(None, bucket)


def _accumulating_worker(rank: int, world_size: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    record = {}
    for closing in ("last", "flush"):  # the epoch's end told by last=True (as fit does), or found by flush()
        model = wrap_model(_small_model(), DistributedContext(rank, world_size, 0, torch.device("cpu")))
        counter = {"all_reduces": 0}
        model.register_comm_hook(counter, _counting_hook)
        step = TrainStep(
            model,
            torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
            nn.MSELoss(),
            device="cpu",
            accumulation_steps=ACCUMULATION,
        )
        for number, (inputs, targets) in enumerate(_micro_batches(rank)):
            step(inputs, targets, last=closing == "last" and number == MICRO_BATCHES - 1)
        step.end_epoch()
        record[closing] = {
            "params": [p.detach().clone() for p in model.parameters()],
            "all_reduces": counter["all_reduces"],
            "optimizer_steps": step.optimizer_steps,
        }
    torch.save(record, Path(out_dir) / f"rank{rank}.pt")
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_accumulating_ranks(tmp_path_factory):
    return _spawn_two_ranks(_accumulating_worker, tmp_path_factory.mktemp("ddp_accumulation"))


@pytest.mark.parametrize("closing", ["last", "flush"])
def test_accumulating_ranks_end_identical_and_equal_to_one_process(two_accumulating_ranks, closing):
    first, second = (r[closing] for r in two_accumulating_ranks)
    for a, b in zip(first["params"], second["params"]):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    model = _small_model()
    step = TrainStep(
        model,
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        nn.MSELoss(),
        device="cpu",
        accumulation_steps=ACCUMULATION,
    )
    for parts in zip(_micro_batches(0), _micro_batches(1)):
        step(torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]))
    step.end_epoch()
    assert first["optimizer_steps"] == step.optimizer_steps == 2
    for mine, theirs in zip(model.parameters(), first["params"]):
        torch.testing.assert_close(mine.detach(), theirs, atol=1e-6, rtol=1e-5)


def test_accumulating_ranks_all_reduce_once_per_optimizer_step(two_accumulating_ranks):
    for rank in two_accumulating_ranks:
        assert rank["last"]["all_reduces"] == rank["last"]["optimizer_steps"] == 2  # not once per micro-batch (7)
        assert rank["flush"]["all_reduces"] == 1  # the short group is reduced by flush() itself, not by DDP


def test_torchrun_trains_with_two_processes(tmp_path):
    # CPU and gloo even on a GPU machine: two ranks on one GPU would ask for a second device (tests/cuda has NCCL)
    env = {
        **os.environ,
        "COURSE_DATA_DIR": str(tmp_path / "data"),
        "COURSE_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "helpers.course.train",
        "cifar",
        "--profile",
        "smoke",
        "--checkpoint-dir",
        str(tmp_path / "run"),
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("after ") == 1  # only rank 0 reports
    assert "2 process(es)" in result.stdout and (tmp_path / "run" / "last.pt").is_file()


class TestContextWithoutProcesses:
    """The distributed helpers' small contracts, without spawning processes: shards cover every item once, who is main,
    when DDP is on, the ranks read from torchrun's variables, local rank 0 goes first, and DDP is unwrapped."""

    @pytest.mark.parametrize("world_size", [1, 2, 3, 4])
    def test_shards_cover_every_item_once_in_order(self, world_size):
        for count in range(12):
            shards = [shard_range(count, DistributedContext(rank, world_size)) for rank in range(world_size)]
            assert [i for share in shards for i in range(count)[share]] == list(range(count))
            assert max(len(range(count)[share]) for share in shards) == -(-count // world_size)

    def test_only_global_rank_0_is_main_and_only_several_processes_enable_ddp(self):
        assert DistributedContext().is_main and not DistributedContext().enabled
        second_node_first_gpu = DistributedContext(rank=4, world_size=8, local_rank=0)
        assert not second_node_first_gpu.is_main and second_node_first_gpu.enabled

    def test_torchrun_s_variables_give_rank_world_size_and_local_rank(self, monkeypatch):
        monkeypatch.setenv("WORLD_SIZE", "8")
        monkeypatch.setenv("RANK", "5")
        monkeypatch.setenv("LOCAL_RANK", "1")
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        monkeypatch.setattr(distributed_module.dist, "is_initialized", lambda: True)  # as if joined already
        context = init_distributed()
        assert (context.rank, context.world_size, context.local_rank) == (5, 8, 1)

    @pytest.mark.parametrize("cuda", [True, False])
    def test_the_process_group_is_bound_to_the_rank_s_gpu(self, monkeypatch, cuda):
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
    def test_leaving_the_group_barriers_only_after_a_run_that_ended_normally(self, monkeypatch, failed):
        events: list[str] = []
        monkeypatch.setattr(distributed_module.dist, "is_initialized", lambda: True)
        monkeypatch.setattr(distributed_module.dist, "barrier", lambda: events.append("barrier"))
        monkeypatch.setattr(distributed_module.dist, "destroy_process_group", lambda: events.append("destroy"))
        distributed_module.cleanup_distributed(failed=failed)
        assert events == (["destroy"] if failed else ["barrier", "destroy"])

    @pytest.mark.parametrize(("local_rank", "expected"), [(0, ["work", "barrier"]), (1, ["barrier", "work"])])
    def test_local_rank_0_works_first_and_the_others_wait_for_it(self, monkeypatch, local_rank, expected):
        events: list[str] = []
        monkeypatch.setattr(distributed_module.dist, "barrier", lambda: events.append("barrier"))
        with local_main_first(DistributedContext(rank=local_rank, world_size=2, local_rank=local_rank)):
            events.append("work")
        assert events == expected

    def test_unwrap_model_returns_the_module_inside_ddp(self, tmp_path):
        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
        try:
            inner = nn.Linear(2, 1)
            assert unwrap_model(nn.parallel.DistributedDataParallel(inner)) is inner
            assert unwrap_model(inner) is inner
        finally:
            dist.destroy_process_group()


ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 60  # both ranks gone this long after both joined the group, or the test fails (and kills them)
STARTUP_S = 300  # for both to start Python, import torch and join


def _wait_until(done: Callable[[], bool], seconds: float) -> None:
    """Poll `done()` every 0.1 s for up to `seconds`."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class TestErrorPath:
    """The DDP error path on two gloo ranks: a rank whose loss turns NaN mid-run raises, leaves the process group with
    no barrier (a barrier there pairs with its peer's all-reduce and both wait for ever), and its peer's next collective
    fails, so both processes exit non-zero well within a minute."""

    def test_a_rank_that_raises_mid_run_ends_both_ranks_non_zero_within_a_minute(self, tmp_path):
        port = _free_port()
        ranks = []
        for rank in range(2):
            env = {
                **os.environ,
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": "2",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "CUDA_VISIBLE_DEVICES": "",  # gloo on the CPU even on a GPU machine
                "PYTHONPATH": str(ROOT),
                "OMP_NUM_THREADS": "1",
            }
            command = [sys.executable, "-m", "tests.ddp_error_worker"]
            with open(tmp_path / f"rank{rank}.log", "w") as log:  # the child keeps its own copy of the descriptor
                ranks.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        logs = [tmp_path / f"rank{rank}.log" for rank in range(2)]
        try:
            # Starting Python and torch is not what is tested (on a loaded 2-core machine it took most of a minute):
            # the clock starts once both ranks have joined the group; rank 1 fails four steps later.
            joined = lambda: all("joined the process group" in log.read_text() for log in logs)  # noqa: E731
            gone = lambda: [process.poll() is not None for process in ranks]  # noqa: E731
            _wait_until(lambda: joined() or any(gone()), STARTUP_S)  # a rank that died starting fails the asserts
            started = time.monotonic()
            _wait_until(lambda: all(gone()), LIMIT_S)
            seconds = time.monotonic() - started
            codes = [process.poll() for process in ranks]
        finally:
            for process in ranks:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        logs = [log.read_text() for log in logs]
        hung = [rank for rank, code in enumerate(codes) if code is None]
        assert not hung, f"rank(s) {hung} still running {LIMIT_S} s after both joined (hung); logs:\n" + "\n".join(logs)
        assert all(code != 0 for code in codes), f"exit codes {codes}; logs:\n" + "\n".join(logs)
        assert "NonFiniteLossError" in logs[1] and "failed=True" in logs[1], logs[1]
        assert "failed=True" in logs[0], logs[0]  # the peer's collective failed: it left without a barrier too
        print(f"both ranks exited non-zero ({codes}) after {seconds:.1f} s")

    @pytest.mark.parametrize("error", [RuntimeError("CUDA out of memory"), KeyboardInterrupt()])
    def test_the_training_command_leaves_the_group_without_a_barrier_when_the_run_fails(self, monkeypatch, error):
        """`python -m helpers.course.train` tells cleanup_distributed that the run failed (an error or Ctrl-C), and that
        it did not when it returned."""
        left: list[bool] = []
        recipe = types.SimpleNamespace(description="d", precision=types.SimpleNamespace(reason="r"), plan="p", data="x")
        monkeypatch.setattr(recipe_run, "prepare_cifar10", lambda **kwargs: None)
        monkeypatch.setattr(recipe_run, "cifar_recipe", lambda *args, **kwargs: recipe)
        monkeypatch.setattr(recipe_run, "cleanup_distributed", lambda *, failed=False: left.append(failed))

        def failing_run(*args, **kwargs):
            raise error

        monkeypatch.setattr(recipe_run, "run_recipe", failing_run)
        if isinstance(error, KeyboardInterrupt):
            assert recipe_run.main(["cifar", "--profile", "smoke"]) == 130
        else:
            with pytest.raises(RuntimeError, match="out of memory"):
                recipe_run.main(["cifar", "--profile", "smoke"])
        assert left == [True]
        monkeypatch.setattr(recipe_run, "run_recipe", lambda *args, **kwargs: [{}])
        monkeypatch.setattr(recipe_run, "run_summary", lambda history, recipe: "")
        monkeypatch.setattr(recipe_run, "result_sentence", lambda record, task: "")
        assert recipe_run.main(["cifar", "--profile", "smoke"]) == 0
        assert left == [True, False]
