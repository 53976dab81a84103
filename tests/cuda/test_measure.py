"""The benchmarks' GPU memory figures come from torch.cuda.max_memory_allocated, reset before the measured blocks."""

from __future__ import annotations

import pytest
import torch

from helpers.measure import measure_pipeline, peak_device_memory_bytes, reset_peak_device_memory

pytestmark = pytest.mark.cuda

MIB = 2**20


def _batches():
    while True:
        yield torch.zeros(8, 1024)  # a small CPU batch


def test_peak_device_memory_is_max_memory_allocated(cuda, monkeypatch):
    reset_peak_device_memory(cuda)
    scratch = torch.empty(96 * MIB, dtype=torch.uint8, device=cuda)
    assert peak_device_memory_bytes(cuda) == torch.cuda.max_memory_allocated(cuda) >= 96 * MIB
    del scratch
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 12345 * MIB)
    assert peak_device_memory_bytes(cuda) == 12345 * MIB  # read from that function, nothing else


def test_the_pipeline_measurement_reports_the_peak_of_its_measured_blocks(cuda):
    big = torch.empty(256 * MIB, dtype=torch.uint8, device=cuda)  # allocated before: the reset forgets it
    del big

    def step(batch):
        scratch = torch.zeros(64 * MIB, dtype=torch.uint8, device=cuda)  # each step holds 64 MiB for a moment
        return float(batch.sum()) + float(scratch[0])

    result = measure_pipeline(_batches(), step, cuda, steps_per_block=2, blocks=2, warmup=1, premade=2)
    assert result.peak_device_mib == torch.cuda.max_memory_allocated(cuda) / MIB
    assert 64 <= result.peak_device_mib < 256
