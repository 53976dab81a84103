"""The benchmarks' GPU memory figures come from torch.cuda.max_memory_allocated, reset as each measured block starts."""

from __future__ import annotations

import pytest
import torch

from helpers.measure import measure_pipeline
from helpers.memory import peak_device_memory_bytes, reset_peak_device_memory

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
    # each block resets the counter as it starts: the highest block's peak, of which the last block's is one
    assert result.peak_device_mib >= torch.cuda.max_memory_allocated(cuda) / MIB
    assert 64 <= result.peak_device_mib < 256


def test_a_blocks_peak_is_counted_above_what_was_held_when_it_started(cuda):
    from helpers.measure import PipelineProbe

    held = torch.empty(128 * MIB, dtype=torch.uint8, device=cuda)  # a rung's data, held throughout

    def step(batch):
        scratch = torch.zeros(32 * MIB, dtype=torch.uint8, device=cuda)
        return scratch[0]

    probe = PipelineProbe(_batches(), step, cuda, premade=1, warmup=1)
    probe.fed_block(2)
    probe.premade_block(2)
    assert 32 * MIB <= probe.peak_above_start_bytes() < 64 * MIB  # the step's scratch, not the 128 MiB held
    assert probe.result().peak_device_mib >= (held.numel() + 32 * MIB) / MIB


def test_a_large_pinned_host_to_device_copy_shows_as_data_wait(cuda):
    from helpers.measure import PipelineProbe, seconds_per_call

    batch = torch.zeros(64, 1024, 1024, dtype=torch.float32).pin_memory()  # 256 MiB, pinned: copied non-blocking

    def loader():
        while True:
            yield batch

    copy_s = seconds_per_call(lambda: batch.to(cuda, non_blocking=True), calls=3, device=cuda)
    probe = PipelineProbe(loader(), lambda b: b[0, 0, 0].add_(1), cuda, premade=1, warmup=1)
    probe.fed_block(4)
    probe.premade_block(4)
    result = probe.result()
    # without the synchronisation after the copy, a non-blocking copy returns at once and its time lands in compute
    assert result.data_wait_ms >= 0.5 * 1000 * copy_s, (result.data_wait_ms, copy_s)
    assert result.data_wait_ms > result.compute_ms


def test_an_on_device_loaders_rate_alone_is_bounded_by_its_kernels(cuda):
    from helpers.measure import PipelineProbe, seconds_per_call, time_batches

    a = torch.randn(2048, 2048, device=cuda)

    def make() -> torch.Tensor:
        out = a
        for _ in range(8):  # queued kernels: the host returns long before they have run
            out = out @ a / 2048
        return out[:16]

    def loader():
        while True:
            yield make()

    kernel_s = seconds_per_call(make, calls=5, device=cuda)  # one batch's kernels, synchronised
    assert seconds_per_call(make, calls=5) >= 0.5 * kernel_s  # no device given: CUDA in use is synchronised anyway
    bound = 16 / kernel_s  # samples/s the kernels allow at most
    assert time_batches(loader(), 40, device=cuda)["samples_per_s"] <= 1.5 * bound
    probe = PipelineProbe(loader(), lambda b: None, cuda, premade=1, warmup=1)
    assert probe.loader_block(40) <= 1.5 * bound
