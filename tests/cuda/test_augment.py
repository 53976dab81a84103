"""Augmentation on CUDA keeps dtype, shape and value range: the CIFAR batch augmentation (kornia), normalisation,
and paired SR augmentation, which keeps each LR/HR pair aligned."""

from __future__ import annotations

import pytest
import torch

from helpers.augment import CIFAR10_MEAN, CIFAR10_STD, cifar_train_augment, denormalize, normalize_only
from helpers.sr_data import PairedSRAugment, bicubic_downscale

pytestmark = pytest.mark.cuda


def _photos(count: int, side: int, seed: int = 0) -> torch.Tensor:
    """uint8 batches with real structure: smooth random fields upsampled, not white noise."""
    generator = torch.Generator().manual_seed(seed)
    coarse = torch.rand(count, 3, side // 4, side // 4, generator=generator)
    return (torch.nn.functional.interpolate(coarse, size=(side, side), mode="bilinear") * 255).round().to(torch.uint8)


def _normalised_bounds(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    mean, std = (torch.tensor(v, device=device).view(1, 3, 1, 1) for v in (CIFAR10_MEAN, CIFAR10_STD))
    return (0 - mean) / std, (1 - mean) / std


def test_cifar_augmentation_on_cuda_keeps_dtype_shape_and_range(cuda):
    images = _photos(256, 32).to(cuda)
    augment = cifar_train_augment().to(cuda)
    torch.manual_seed(0)
    out = augment(images)
    assert out.device == cuda and out.dtype == torch.float32 and out.shape == (256, 3, 32, 32)
    low, high = _normalised_bounds(cuda)
    assert bool((out >= low - 1e-5).all()) and bool((out <= high + 1e-5).all())  # pixels stayed inside [0, 1]
    shown = denormalize(out, mean=CIFAR10_MEAN, std=CIFAR10_STD)
    assert float(shown.min()) >= 0 and float(shown.max()) <= 1
    assert len({tuple(image.flatten()[:64].tolist()) for image in augment(images[:1].expand(64, -1, -1, -1))}) > 32
    torch.manual_seed(0)
    assert torch.equal(out, augment(images))  # one seed, one batch: reproducible on the GPU


def test_normalize_only_on_cuda_matches_the_cpu():
    images = _photos(8, 32)
    on_gpu = normalize_only(CIFAR10_MEAN, CIFAR10_STD).cuda()(images.cuda())
    assert on_gpu.dtype == torch.float32 and on_gpu.shape == images.shape
    torch.testing.assert_close(on_gpu.cpu(), normalize_only(CIFAR10_MEAN, CIFAR10_STD)(images), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("jitter", [0.0, 0.3])
def test_paired_sr_augmentation_on_cuda_keeps_dtype_shape_range_and_pairs(cuda, exact_fp32, jitter):
    hr = _photos(32, 64, seed=1).to(cuda)
    lr = bicubic_downscale(hr, 4)
    torch.manual_seed(0)
    lr_out, hr_out = PairedSRAugment(jitter=jitter, jitter_p=1.0)(lr, hr)
    assert lr_out.device == cuda and hr_out.device == cuda
    assert lr_out.dtype == hr_out.dtype == torch.float32
    assert lr_out.shape == (32, 3, 16, 16) and hr_out.shape == (32, 3, 64, 64)
    assert float(torch.stack([lr_out.min(), hr_out.min()]).min()) >= 0
    assert float(torch.stack([lr_out.max(), hr_out.max()]).max()) <= 1
    if jitter == 0:  # flips and rotations only: LR is still the downscaled HR, pair by pair
        gap = (bicubic_downscale(hr_out, 4) - lr_out)[..., 2:-2, 2:-2].abs().max()
        assert float(gap) <= 2 / 255  # uint8 rounding of the original LR
        assert not torch.equal(hr_out, hr.float() / 255)  # and something was turned
