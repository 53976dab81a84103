"""Augmentation details the main tests leave open: the crop's flip probability is the one asked for (at every p,
not only at 0.5 where a reversed comparison gives the same share)."""

from __future__ import annotations

import pytest
import torch

from helpers.augment import BatchHorizontalFlip, BatchRandomCrop


def _same_images(batch: int = 400, size: int = 6) -> torch.Tensor:
    one = torch.arange(3 * size * size, dtype=torch.float32).view(3, size, size)
    return one.expand(batch, -1, -1, -1).contiguous()


def _flipped_share(op: torch.nn.Module, images: torch.Tensor) -> float:
    out = op(images)
    flipped = torch.tensor([torch.equal(o, images[0].flip(-1)) for o in out])
    kept = torch.tensor([torch.equal(o, images[0]) for o in out])
    assert bool((flipped | kept).all())
    return float(flipped.float().mean())


@pytest.mark.parametrize(("p", "low", "high"), [(1.0, 1.0, 1.0), (0.2, 0.12, 0.28), (0.0, 0.0, 0.0)])
def test_the_crop_flips_the_share_of_samples_it_is_asked_to(p, low, high):
    torch.manual_seed(0)
    assert low <= _flipped_share(BatchRandomCrop(6, padding=0, flip_p=p), _same_images()) <= high


@pytest.mark.parametrize(("p", "low", "high"), [(1.0, 1.0, 1.0), (0.2, 0.12, 0.28)])
def test_the_flip_flips_the_share_of_samples_it_is_asked_to(p, low, high):
    torch.manual_seed(0)
    assert low <= _flipped_share(BatchHorizontalFlip(p), _same_images()) <= high
