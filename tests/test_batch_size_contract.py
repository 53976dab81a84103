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


def test_cublas_and_cudnn_allocation_failures_halve_the_batch_too_and_other_errors_do_not(monkeypatch):
    """cuBLAS and cuDNN report a failed workspace allocation as a RuntimeError, not as OutOfMemoryError; and the
    failed step's tensors, held by the traceback's frames, are freed before empty_cache returns the cache."""
    import weakref

    import pytest

    from helpers import batch_size

    held: list[weakref.ref] = []
    alive_at_empty_cache: list[bool] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: alive_at_empty_cache.append(held[-1]() is not None))
    failures = iter(
        [
            RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
            RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"),
        ]
    )

    def run_step(batch: int) -> None:
        activations = torch.ones(batch, 1024)  # what a step holds when it fails
        held.append(weakref.ref(activations))
        if batch > 4:
            raise next(failures)

    monkeypatch.setattr(batch_size, "_step_bytes", lambda run, probe, device: 1)
    batch, why = batch_that_fits(run_step, wanted=16, device=torch.device("cpu"))
    assert batch == 4 and why.count("out of memory on the device") == 2
    assert alive_at_empty_cache == [False, False]  # freed first, then the cache emptied
    with pytest.raises(RuntimeError, match="illegal memory access"):

        def broken(batch: int) -> None:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

        batch_that_fits(broken, wanted=16, device=torch.device("cpu"))
