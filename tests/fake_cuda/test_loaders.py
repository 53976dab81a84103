"""The device loaders on fake CUDA, built as a user builds them (augmentations on the CPU, data from the CPU): every
batch lands on `cuda` with no device mismatch, equals the CPU path's batch drawn from the same seeds, and the loop
that makes the batches makes the host wait nowhere, except where a dependency reads device values itself.

That exception is kornia's ColorJitter (cifar_train_augment's jitter, device_train_augment's): per batch it reads its
random order and, for each of its steps, whether any sample needs it (`.tolist()` and `.any()` in
kornia/augmentation/_2d/intensity/color_jiggle.py), a host synchronisation each on a GPU; moving it to the device
reads its parameters once more (kornia/augmentation/utils/param_validation.py). Lesson 04 says so beside its table.
"""

from __future__ import annotations

import pytest
import torch

from helpers.augment import CIFAR10_MEAN, CIFAR10_STD, cifar_train_augment, normalize_only, torchvision_cifar_augment
from helpers.device_crop import IMAGENET_MEAN, IMAGENET_STD, device_train_augment
from helpers.loading import DeviceTensorLoader
from helpers.sr_cache import CachedCropLoader, DecodedSRCache, DeviceSRCropLoader

from .harness import real

KORNIA_JITTER = "kornia/augmentation/_2d/intensity/color_jiggle.py"


@pytest.fixture(scope="module")
def cache(photo_dir) -> DecodedSRCache:
    return DecodedSRCache(photo_dir, scale=4)


def _cifar_like(count: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (count, 3, 32, 32), dtype=torch.uint8, generator=generator)
    return images, torch.randint(0, 10, (count,), generator=generator)


def _epoch(loader, seed: int = 1) -> list[tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(seed)  # the augmentations' draws
    return list(loader)


def cifar_normalize_only() -> torch.nn.Sequential:
    """Evaluation's preprocessing with the statistics CIFAR-10 training normalised with."""
    return normalize_only(CIFAR10_MEAN, CIFAR10_STD)


@pytest.mark.parametrize("factory", [cifar_train_augment, torchvision_cifar_augment, cifar_normalize_only])
def test_device_tensor_loader_takes_an_augmentation_built_on_the_cpu(fake_cuda, factory):
    images, labels = _cifar_like()
    augment = factory()  # built on the CPU, as notebook 06 builds it: its (1, 3, 1, 1) buffers are CPU tensors
    expected = _epoch(DeviceTensorLoader(images, labels, batch_size=16, augment=factory(), seed=0))
    with fake_cuda() as traffic:
        loader = DeviceTensorLoader(images, labels, batch_size=16, device="cuda", augment=augment, seed=0)
        start = len(traffic.waits)
        batches = _epoch(loader)
        loop = traffic.waits[start:]
    assert len(batches) == 3
    for (got_images, got_labels), (want_images, want_labels) in zip(batches, expected):
        assert got_images.device.type == got_labels.device.type == "cuda" and got_images.dtype == torch.float32
        assert got_images.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(real(got_images), want_images)
        assert torch.equal(real(got_labels), want_labels)
    outside_kornia = [w for w in loop if KORNIA_JITTER not in w.where]
    assert outside_kornia == [], outside_kornia  # the crop, flip and normalisation read nothing back
    if factory is cifar_train_augment:  # kornia's jitter reads its order and a step check or more, every batch
        assert len(loop) >= 2 * len(batches) and {w.kind for w in loop} == {"host read"}
    else:
        assert loop == []


def test_device_crop_augmentation_on_decoded_images_of_different_sizes(fake_cuda):
    generator = torch.Generator().manual_seed(0)
    sizes = [(3, 90, 120), (3, 140, 100), (3, 64, 64), (3, 120, 160)]
    decoded = [torch.randint(0, 256, size, dtype=torch.uint8, generator=generator) for size in sizes]
    for jitter in (0.0, 0.2):
        augment = device_train_augment(
            64, jitter=jitter, generator=torch.Generator().manual_seed(3), mean=IMAGENET_MEAN, std=IMAGENET_STD
        )
        with fake_cuda() as traffic:
            augment.to("cuda")
            on_device = [image.to("cuda") for image in decoded]  # nvJPEG's output: images on the GPU
            start = len(traffic.waits)
            torch.manual_seed(1)
            batch = augment(on_device)
            loop = traffic.waits[start:]
        assert batch.device.type == "cuda" and batch.shape == (4, 3, 64, 64)
        assert batch.is_contiguous(memory_format=torch.channels_last)
        assert [w for w in loop if KORNIA_JITTER not in w.where] == []  # boxes copied pinned and non-blocking
        assert bool(loop) == bool(jitter)
        cpu = device_train_augment(
            64, jitter=jitter, generator=torch.Generator().manual_seed(3), mean=IMAGENET_MEAN, std=IMAGENET_STD
        )
        torch.manual_seed(1)
        torch.testing.assert_close(real(batch), cpu(decoded), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"channels": "y"},
        {"lr_resample": "pil-bicubic", "augment": False},
    ],
)
def test_the_zero_cpu_sr_loader_makes_its_batches_on_the_device_without_a_host_wait(fake_cuda, cache, options):
    expected = list(DeviceSRCropLoader(cache, batch_size=6, hr_crop=64, batches_per_epoch=3, seed=2, **options))
    with fake_cuda() as traffic:
        loader = DeviceSRCropLoader(
            cache, batch_size=6, hr_crop=64, batches_per_epoch=3, seed=2, device="cuda", **options
        )
        iterator = iter(loader)
        batches = [next(iterator)]  # the first batch also builds and copies the cached bicubic matrices, once
        with traffic.none_expected("DeviceSRCropLoader's batches"):
            batches += list(iterator)
    for (lr, hr), (want_lr, want_hr) in zip(batches, expected, strict=True):
        assert lr.device.type == hr.device.type == "cuda" and lr.dtype == hr.dtype == torch.float32
        torch.testing.assert_close(real(lr), want_lr)
        torch.testing.assert_close(real(hr), want_hr)


def test_the_cached_crop_loader_sends_pinned_uint8_and_converts_on_the_device(fake_cuda, cache):
    """Its crops are gathered on the host (real NumPy work here) and copied pinned and non-blocking. The background
    thread (prefetch > 0) runs outside FakeTensorMode, whose modes are per thread, and would pin for real: the loop
    is checked with prefetch=0, the same batches made in the consumer's thread."""
    expected = list(CachedCropLoader(cache, batch_size=6, hr_crop=64, batches_per_epoch=3, seed=5))
    for as_float in (True, False):
        with fake_cuda() as traffic:
            loader = CachedCropLoader(
                cache,
                batch_size=6,
                hr_crop=64,
                batches_per_epoch=3,
                seed=5,
                device="cuda",
                prefetch=0,
                as_float=as_float,
            )
            with traffic.none_expected("CachedCropLoader's batches"):
                batches = list(loader)
        for (lr, hr), (want_lr, want_hr) in zip(batches, expected, strict=True):
            assert lr.device.type == hr.device.type == "cuda"
            assert lr.dtype == (torch.float32 if as_float else torch.uint8)
            torch.testing.assert_close(real(lr).float() / (1 if as_float else 255), want_lr)
            torch.testing.assert_close(real(hr).float() / (1 if as_float else 255), want_hr)


def test_paired_sr_augmentation_on_device_batches(fake_cuda, cache):
    """PairedSRAugment on the zero-CPU loader's batches: flips and rotations send one index per batch; with colour
    jitter, kornia's reads are the only host waits."""
    from helpers.sr_data import PairedSRAugment

    for jitter in (0.0, 0.3):
        augment = PairedSRAugment(jitter=jitter, jitter_p=1.0)  # built on the CPU
        with fake_cuda() as traffic:
            augment.to("cuda")
            loader = DeviceSRCropLoader(cache, batch_size=6, hr_crop=64, batches_per_epoch=2, seed=2, device="cuda")
            iterator = iter(loader)
            next(iterator)  # the cached bicubic matrices, built and copied once
            lr, hr = next(iterator)
            start = len(traffic.waits)
            out_lr, out_hr = augment(lr, hr)
            waits = traffic.waits[start:]
        assert out_lr.device.type == out_hr.device.type == "cuda" and out_hr.shape == hr.shape
        assert [w for w in waits if KORNIA_JITTER not in w.where] == []
        assert bool(waits) == bool(jitter)


def test_the_gan_sr_step_trains_both_models_on_the_device(fake_cuda):
    from torch import nn

    from helpers.step import gan_sr_step

    torch.manual_seed(0)
    generator = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(3, 3, 3, padding=1))
    discriminator = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 1))
    batches = [(torch.rand(2, 3, 8, 8), torch.rand(2, 3, 16, 16)) for _ in range(3)]
    with fake_cuda() as traffic:
        generator.to("cuda"), discriminator.to("cuda")
        step = gan_sr_step(generator, discriminator, device="cuda")
        with traffic.none_expected("the GAN step on pinned batches"):
            losses = [step(tuple(t.pin_memory() for t in batch)) for batch in batches]
    assert all(loss.device.type == "cuda" for pair in losses for loss in pair.values())
