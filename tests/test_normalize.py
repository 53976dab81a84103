"""Normalisation on the device and its inverse for display: normalize_only is (x / 255 - mean) / std per channel, and
denormalize undoes it (clamped to [0, 1]) for a batch and for a single image."""

from __future__ import annotations

import torch

from helpers.augment import CIFAR10_MEAN, CIFAR10_STD, denormalize, normalize_only


def _images() -> torch.Tensor:
    return torch.randint(0, 256, (4, 3, 6, 5), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))


def test_normalize_only_is_the_per_channel_formula():
    images = _images()
    mean, std = torch.tensor(CIFAR10_MEAN).view(1, 3, 1, 1), torch.tensor(CIFAR10_STD).view(1, 3, 1, 1)
    torch.testing.assert_close(normalize_only(CIFAR10_MEAN, CIFAR10_STD)(images), (images / 255 - mean) / std)
    mine = normalize_only(mean=(0.5, 0.25, 0.0), std=(0.5, 0.25, 1.0))(images)
    torch.testing.assert_close(mine[:, 2], images[:, 2] / 255)
    torch.testing.assert_close(mine[:, 0], (images[:, 0] / 255 - 0.5) / 0.5)


def test_denormalize_undoes_normalize_for_batches_and_single_images():
    images = _images()
    unit = images / 255
    normalized = normalize_only(CIFAR10_MEAN, CIFAR10_STD)(images)
    torch.testing.assert_close(denormalize(normalized, mean=CIFAR10_MEAN, std=CIFAR10_STD), unit)
    torch.testing.assert_close(
        denormalize(normalized[1], mean=CIFAR10_MEAN, std=CIFAR10_STD), unit[1]
    )  # (C, H, W): one image
    own = normalize_only(mean=(0.1, 0.2, 0.3), std=(0.2, 0.3, 0.4))(images)
    torch.testing.assert_close(denormalize(own, mean=(0.1, 0.2, 0.3), std=(0.2, 0.3, 0.4)), unit)


def test_denormalize_clamps_to_the_displayable_range():
    out = denormalize(
        torch.tensor([[-10.0, 10.0]]).view(1, 1, 1, 2).expand(1, 3, 1, 2), mean=CIFAR10_MEAN, std=CIFAR10_STD
    )
    assert torch.equal(out, torch.tensor([0.0, 1.0]).view(1, 1, 1, 2).expand(1, 3, 1, 2))


def test_normalize_only_hands_evaluation_the_training_augmentations_dtype_and_layout():
    # evaluation preprocessing once returned NCHW floats while training batches were channels_last: the model then
    # changed layout at every evaluation batch
    from helpers.augment import cifar_train_augment

    images = _images()
    evaluated, trained = (
        normalize_only(CIFAR10_MEAN, CIFAR10_STD)(images),
        cifar_train_augment(size=4, padding=0)(images[..., :4, :4]),
    )
    assert evaluated.dtype == trained.dtype == torch.float32
    assert evaluated.is_contiguous(memory_format=torch.channels_last)
    assert trained.is_contiguous(memory_format=torch.channels_last)
    assert normalize_only(CIFAR10_MEAN, CIFAR10_STD, channels_last=False)(images).is_contiguous()
