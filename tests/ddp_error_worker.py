"""One rank of the DDP error-path test (tests/test_distributed.py), started as a plain process (no torchrun
agent to stop a hung peer): two gloo ranks on loopback train a small DDP model with `fit`, and rank 1's fourth batch
is NaN, so its TrainStep raises NonFiniteLossError while rank 0 goes on into the next step's all-reduce. The run is
wrapped as helpers/course/recipe_run.py wraps it: `cleanup_distributed(failed=...)` in a `finally`."""

from __future__ import annotations

import torch
from torch import nn

from helpers.distributed import cleanup_distributed, init_distributed, wrap_model
from helpers.step import TrainStep
from helpers.trainer import fit

BAD_BATCH = 3  # rank 1's batch that is NaN (the fourth)


def _batches(rank: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(rank)
    batches = [(torch.randn(4, 6, generator=generator), torch.randn(4, 2, generator=generator)) for _ in range(8)]
    if rank == 1:
        batches[BAD_BATCH] = (torch.full((4, 6), float("nan")), batches[BAD_BATCH][1])
    return batches


def main() -> None:
    context = init_distributed()  # RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from the test: gloo on the CPU
    print(f"rank {context.rank}: joined the process group", flush=True)  # the test's clock starts when both have
    torch.manual_seed(0)
    model = wrap_model(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2)), context)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.01), nn.MSELoss(), device="cpu")
    failed = True
    try:
        fit(model, _batches(context.rank), step, epochs=20, progress=False, context=context)
        failed = False
    finally:
        print(f"rank {context.rank}: leaving the process group, failed={failed}", flush=True)
        cleanup_distributed(failed=failed)


if __name__ == "__main__":
    main()
