"""Choosing a batch from measured memory: scaled to the free memory, never above the ask, and not fooled on a CPU by
an allocator that reuses memory."""

from __future__ import annotations

import mmap

import torch
from torch import nn

import helpers.batch_size as batch_size


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
