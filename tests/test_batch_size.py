"""Choosing a batch from measured memory: scaled to the free memory, never above the ask, and not fooled on a CPU by
an allocator that reuses memory."""

from __future__ import annotations

import mmap

import torch
from torch import nn

import helpers.batch_size as batch_size
from helpers.batch_size import batch_that_fits


def test_batch_that_fits_scales_a_measured_step_to_the_free_memory(monkeypatch):
    calls = []

    def run_step(batch):
        calls.append(batch)
        # 40 MiB per sample, one block each, fresh pages by construction: an anonymous mapping of its own (never a
        # free heap chunk the allocator reuses), every page written once, so resident memory grows by exactly that
        blocks = [mmap.mmap(-1, 40 * 2**20) for _ in range(batch)]
        for block in blocks:
            for offset in range(0, len(block), mmap.PAGESIZE):
                block[offset] = 1
        for block in blocks:  # the peak is measured: unmapping now returns the memory
            block.close()
        return batch

    monkeypatch.setattr(batch_size, "free_memory_bytes", lambda device: 800 * 2**20)  # 800 MiB free, half of it usable
    batch, why = batch_size.batch_that_fits(run_step, wanted=64, device=torch.device("cpu"), probe=2)
    assert 8 <= batch <= 11 and calls[0] == 2 and calls[-1] == batch  # about 400 MiB / 40 MiB, then one real step
    assert "MiB per sample" in why and "asked for 64" in why
    assert batch_size.batch_that_fits(run_step, wanted=3, device=torch.device("cpu"))[0] == 3  # never above the ask


def test_a_cpu_step_counts_the_tensors_it_saves_for_backward_even_when_memory_is_reused(monkeypatch):
    # an allocator that reuses freed blocks: resident memory does not grow during the step (seen in lesson 06, where
    # a 224-px ResNet18 step measured 1 MiB per sample)
    monkeypatch.setattr(batch_size, "current_rss_bytes", lambda: 500 * 2**20)
    monkeypatch.setattr(batch_size, "peak_rss_bytes", lambda: 500 * 2**20)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1))
    x = torch.randn(8, 3, 64, 64)
    saved = batch_size._step_bytes(lambda batch: model(x[:batch]).sum().backward(), 8, torch.device("cpu"))
    # autograd keeps the input (8 x 3 x 64 x 64) and the ReLU's output (8 x 16 x 64 x 64, which the second convolution
    # saves too: one storage, counted once), float32
    assert saved >= (8 * 3 + 8 * 16) * 64 * 64 * 4


def _affine_step(fixed_s, per_image_s, warmup_s=5.0):
    """A fake step whose cost is fixed_s + per_image_s x batch, the first call paying a warm-up on top."""
    calls = []

    def seconds_at(batch):
        calls.append(batch)
        return fixed_s + per_image_s * batch + (warmup_s if len(calls) == 1 else 0.0)

    return seconds_at, calls


def test_batch_for_step_time_fits_an_affine_step_after_a_warm_up_and_predicts_its_time():
    # a step of 0.5 s + 10 ms per image: the old estimate (one untimed-warm-up call at batch 2, scaled) read 0.26 s
    # per image (with the warm-up, 2.76 s) and chose batch 3; the right batch for steps of at most 1 s is 50
    seconds_at, calls = _affine_step(0.5, 0.01)
    batch, predicted, why = batch_size.batch_for_step_time(seconds_at, largest=1000, step_s=1.0)
    assert batch == 50 and abs(predicted - 1.0) < 1e-9
    assert calls[0] == calls[1] == 16 and len(calls) == 3  # warm-up, the representative batch, the check
    assert "batch 50, predicted step 1 s" in why
    seconds_at, _ = _affine_step(0.5, 0.01)
    batch, predicted, _ = batch_size.batch_for_step_time(seconds_at, largest=30, step_s=1.0)
    assert batch == 30 and abs(predicted - 0.8) < 1e-9  # the memory's cap wins, and the time said is its own
    seconds_at, _ = _affine_step(0.0, 0.02)  # no fixed cost: proportional from the start
    batch, predicted, _ = batch_size.batch_for_step_time(seconds_at, largest=1000, step_s=1.0)
    assert batch == 50 and abs(predicted - 1.0) < 1e-9


class TestHalving:
    """batch_that_fits halves the batch on each CUDA out-of-memory error (not quarters it)."""

    def test_out_of_memory_halves_the_batch_until_a_step_fits(self):
        tried: list[int] = []

        def run_step(batch: int) -> None:
            tried.append(batch)
            if batch > 8:
                raise torch.cuda.OutOfMemoryError("stand-in for CUDA running out")
            torch.ones(batch, 2, requires_grad=True).sum().backward()

        batch, why = batch_that_fits(run_step, wanted=16, device=torch.device("cpu"))
        assert batch == 8 and tried[1:] == [16, 8] and "halved to 8" in why

    def test_cublas_and_cudnn_allocation_failures_halve_the_batch_too_and_other_errors_do_not(self, monkeypatch):
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
