"""PrefetchLoader on CUDA: side-stream copies hand over the same batches as the CPU path, even while a long step on
the current stream is still running when the next copy is queued."""

from __future__ import annotations

import pytest
import torch

from helpers.prefetch import PrefetchLoader

pytestmark = pytest.mark.cuda


def _pinned_batches(count: int, side: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [
        (
            torch.randint(0, 256, (8, 3, side, side), dtype=torch.uint8, generator=generator).pin_memory(),
            torch.arange(8).pin_memory(),
        )
        for _ in range(count)
    ]


def test_side_stream_batches_equal_the_cpu_conversion(cuda, exact_fp32):
    batches = _pinned_batches(6, 64)
    on_gpu = PrefetchLoader(batches, cuda, mean=(0.5,) * 3, std=(0.25,) * 3)
    on_cpu = PrefetchLoader(batches, "cpu", mean=(0.5,) * 3, std=(0.25,) * 3)
    weight = torch.randn(256, 256, device=cuda)
    for (gpu_images, gpu_labels), (cpu_images, cpu_labels) in zip(on_gpu, on_cpu):
        for _ in range(20):  # a long step on the current stream while the next batch is copied on the side stream
            weight = torch.tanh(weight @ weight)
        assert gpu_images.device.type == "cuda" and gpu_images.dtype == torch.float32
        torch.testing.assert_close(gpu_images.cpu(), cpu_images)
        assert torch.equal(gpu_labels.cpu(), cpu_labels)


def test_the_copy_runs_on_the_side_stream(cuda):
    loader = PrefetchLoader(_pinned_batches(2, 32), cuda)
    assert loader.side_stream is not None and loader.side_stream != torch.cuda.current_stream(cuda)
    assert len(list(loader)) == 2
