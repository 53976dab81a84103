"""The decoded-cache loaders on CUDA: the zero-CPU loader cuts the same crops on the GPU as on the CPU for one seed,
on the scale grid (LR origin x scale = HR origin); the CPU-side loader sends pinned uint8 and matches its CPU run."""

from __future__ import annotations

import pytest
import torch

from helpers.images import to_unit_float
from helpers.sr_cache import CachedCropLoader, DecodedSRCache, DeviceSRCropLoader

pytestmark = pytest.mark.cuda

SCALE, CROP = 4, 64


@pytest.fixture(scope="module")
def cache(distinct_photos) -> DecodedSRCache:
    return DecodedSRCache(distinct_photos, scale=SCALE)


def _uint8(images: torch.Tensor) -> torch.Tensor:
    """Float crops in [0, 1] back to the uint8 pixels they were made from."""
    return (images * 255).round().to(torch.uint8)


def _find(cache: DecodedSRCache, crop: torch.Tensor) -> tuple[int, int, int]:
    """(image, y, x) of the window of a cached HR image that equals `crop` (uint8, C x h x w) exactly (the photos
    are distinct, so there is one such window)."""
    for index in range(len(cache)):
        whole = cache.image(index)[1]
        height, width = whole.shape[1] - crop.shape[1] + 1, whole.shape[2] - crop.shape[2] + 1
        corner = (whole[:, :height, :width] == crop[:, :1, :1]).all(0)  # candidates: the top-left pixel matches
        for y, x in corner.nonzero().tolist():
            if torch.equal(whole[:, y : y + crop.shape[1], x : x + crop.shape[2]], crop):
                return index, y, x
    raise AssertionError("the crop is not a window of any cached image")


@pytest.mark.parametrize("augment", [False, True])
def test_device_loader_on_cuda_cuts_the_same_crops_as_on_the_cpu(cache, cuda, exact_fp32, augment):
    options = dict(batch_size=8, hr_crop=CROP, batches_per_epoch=3, seed=5, augment=augment)
    on_cpu = list(DeviceSRCropLoader(cache, device="cpu", **options))
    on_gpu = list(DeviceSRCropLoader(cache, device=cuda, **options))
    assert len(on_gpu) == len(on_cpu) == 3
    for (lr_cpu, hr_cpu), (lr_gpu, hr_gpu) in zip(on_cpu, on_gpu):
        assert hr_gpu.device == cuda and hr_gpu.dtype == torch.float32 and hr_gpu.shape == (8, 3, CROP, CROP)
        assert lr_gpu.shape == (8, 3, CROP // SCALE, CROP // SCALE)
        assert torch.equal(_uint8(hr_gpu).cpu(), _uint8(hr_cpu))  # pixel-exact: same images, origins, flips
        torch.testing.assert_close(lr_gpu.cpu(), lr_cpu, atol=1e-5, rtol=0)  # the same bicubic, run on the GPU


def test_device_loader_on_cuda_keeps_lr_origin_times_scale_equal_to_the_hr_origin(cache, cuda):
    loader = DeviceSRCropLoader(
        cache, batch_size=6, hr_crop=CROP, batches_per_epoch=1, seed=3, device=cuda, augment=False
    )
    lr, hr = next(iter(loader))
    worst_aligned, worst_shifted = 0.0, 0.0
    for lr_crop, hr_crop in zip(lr.cpu(), _uint8(hr).cpu()):
        index, y, x = _find(cache, hr_crop)
        assert y % SCALE == 0 and x % SCALE == 0, f"HR origin ({y}, {x}) is off the x{SCALE} grid"
        cached_lr = to_unit_float(cache.image(index)[0])  # the whole image's LR, made once by the cache
        ly, lx, size = y // SCALE, x // SCALE, CROP // SCALE
        interior = (slice(None), slice(2, -2), slice(2, -2))  # the filter sees outside the crop at its border
        aligned = cached_lr[:, ly : ly + size, lx : lx + size]
        worst_aligned = max(worst_aligned, float((aligned - lr_crop)[interior].abs().max()))
        if ly + size + 1 <= cached_lr.shape[1] and lx + size + 1 <= cached_lr.shape[2]:
            shifted = cached_lr[:, ly + 1 : ly + 1 + size, lx + 1 : lx + 1 + size]
            worst_shifted = max(worst_shifted, float((shifted - lr_crop)[interior].abs().max()))
    assert worst_aligned <= 4 / 255  # the cache rounds to uint8 after each pass, as MATLAB does: a few levels
    assert worst_shifted > 10 / 255  # while one LR pixel of misalignment is plainly visible


def test_cached_loader_on_cuda_sends_pinned_uint8_and_matches_its_cpu_run(cache, cuda):
    options = dict(batch_size=8, hr_crop=CROP, batches_per_epoch=3, seed=2)
    on_cpu = list(CachedCropLoader(cache, device="cpu", as_float=False, **options))
    host = list(CachedCropLoader(cache, device=cuda, as_float=False, **options)._host_batches())
    assert all(t.is_pinned() and t.dtype == torch.uint8 for batch in host for t in batch)  # async copies need pins
    loader = CachedCropLoader(cache, device=cuda, as_float=False, **options)
    assert loader.prefetch == 2  # a background thread gathers the next batch while the GPU works
    on_gpu = list(loader)
    floats = list(CachedCropLoader(cache, device=cuda, **options))
    for (lr_cpu, hr_cpu), (lr_gpu, hr_gpu), (lr_float, hr_float) in zip(on_cpu, on_gpu, floats):
        assert lr_gpu.device == cuda and lr_gpu.dtype == torch.uint8
        assert torch.equal(lr_gpu.cpu(), lr_cpu) and torch.equal(hr_gpu.cpu(), hr_cpu)
        assert hr_float.device == cuda and hr_float.dtype == torch.float32
        assert torch.equal(hr_float.cpu(), to_unit_float(hr_cpu)) and torch.equal(lr_float.cpu(), to_unit_float(lr_cpu))
