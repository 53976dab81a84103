"""batch_that_fits halves the batch on each CUDA out-of-memory error (not quarters it)."""

from __future__ import annotations

import torch

from helpers.batch_size import batch_that_fits


def test_out_of_memory_halves_the_batch_until_a_step_fits():
    tried: list[int] = []

    def run_step(batch: int) -> None:
        tried.append(batch)
        if batch > 8:
            raise torch.cuda.OutOfMemoryError("stand-in for CUDA running out")
        torch.ones(batch, 2, requires_grad=True).sum().backward()

    batch, why = batch_that_fits(run_step, wanted=16, device=torch.device("cpu"))
    assert batch == 8 and tried[1:] == [16, 8] and "halved to 8" in why
