"""DDP on NCCL with the GPUs present, launched through torchrun: with one GPU a world of one (NCCL group, DDP
wrapper) trains exactly like one process; with two or more, the gloo test's checks hold on NCCL. The course's
training command also runs under torchrun on CUDA."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from helpers.step import TrainStep
from tests.test_distributed import STEPS, _data, _model

pytestmark = pytest.mark.cuda

REPO = Path(__file__).resolve().parents[2]


def _environment(tmp_path: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "COURSE_DATA_DIR": str(tmp_path / "data"),
        "COURSE_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }


def _torchrun(processes: int, *arguments: str, tmp_path: Path) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(processes),
        *arguments,
    ]
    result = subprocess.run(command, env=_environment(tmp_path), capture_output=True, text=True, timeout=600, cwd=REPO)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result


@pytest.fixture(scope="module")
def nccl_ranks(tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("nccl")
    processes = min(2, torch.cuda.device_count())
    _torchrun(processes, str(REPO / "tests" / "cuda" / "nccl_worker.py"), str(folder), tmp_path=folder)
    return [torch.load(folder / f"rank{rank}.pt", weights_only=True) for rank in range(processes)]


def _needs_two_gpus() -> None:
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs, this machine has {torch.cuda.device_count()}: the world-of-one NCCL test ran")


def test_the_ranks_used_nccl_and_reduced_across_the_group(nccl_ranks):
    world = len(nccl_ranks)
    for record in nccl_ranks:
        assert record["backend"] == "nccl" and record["world_size"] == world
        assert record["reduced"] == [float(sum(range(1, world + 1)))]  # every rank added its rank + 1


def test_ddp_on_nccl_matches_one_process_on_the_combined_batch(nccl_ranks, exact_fp32):
    _, labels = _data()
    torch.manual_seed(0)
    model = _model().cuda()
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), device="cuda")
    assert all(len(record["params"]) == STEPS for record in nccl_ranks)
    for number in range(STEPS):
        inputs = torch.cat([record["inputs"][number] for record in nccl_ranks])
        targets = torch.cat([labels[record["indices"][number]] for record in nccl_ranks])
        step(inputs, targets)
        for mine, theirs in zip(model.parameters(), nccl_ranks[0]["params"][number]):
            torch.testing.assert_close(mine.detach().cpu(), theirs, atol=1e-5, rtol=1e-4)


def test_ranks_see_disjoint_shards_on_nccl(nccl_ranks):
    _needs_two_gpus()
    everything = [i for record in nccl_ranks for batch in record["indices"] for i in batch.tolist()]
    assert len(everything) == len(set(everything))  # nobody sees a sample twice in the epoch


def test_ranks_draw_different_augmentations_on_nccl(nccl_ranks):
    _needs_two_gpus()
    assert not torch.equal(nccl_ranks[0]["inputs"][0], nccl_ranks[1]["inputs"][0])


def test_parameters_stay_identical_across_ranks_on_nccl(nccl_ranks):
    _needs_two_gpus()
    for number in range(STEPS):
        for a, b in zip(nccl_ranks[0]["params"][number], nccl_ranks[1]["params"][number]):
            torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_the_training_command_runs_under_torchrun_on_cuda(tmp_path):
    processes = min(2, torch.cuda.device_count())
    result = _torchrun(
        processes,
        "-m",
        "helpers.course.train",
        "cifar",
        "--profile",
        "smoke",
        "--checkpoint-dir",
        str(tmp_path / "run"),
        tmp_path=tmp_path,
    )
    assert result.stdout.count("after ") == 1  # only rank 0 reports
    assert f"{processes} process(es)" in result.stdout and "device cuda" in result.stdout
    assert (tmp_path / "run" / "last.pt").is_file()
