"""Classification augmentation on the device: per-sample draws, reproducible under a seed, batched random crops."""

from __future__ import annotations

import torch

from helpers.augment import BatchRandomCrop, cifar_train_augment, normalize_only


def _batch(n: int = 64) -> torch.Tensor:
    one = torch.arange(3 * 32 * 32, dtype=torch.int64).reshape(1, 3, 32, 32) % 251
    return one.repeat(n, 1, 1, 1).to(torch.uint8)  # the same image n times


def test_classification_augment_is_per_sample_and_repeats_under_a_seed():
    augment = cifar_train_augment()
    torch.manual_seed(0)
    first = augment(_batch())
    distinct = {tuple(image.flatten()[:200].round(decimals=4).tolist()) for image in first}
    assert len(distinct) > 32  # one image in, many different augmentations out
    torch.manual_seed(0)
    assert torch.equal(first, augment(_batch()))
    assert first.dtype == torch.float32 and first.shape == (64, 3, 32, 32)


def test_normalize_only_is_deterministic():
    out = normalize_only()(_batch(2))
    assert torch.equal(out[0], out[1]) and abs(float(out.mean())) < 3


def test_batch_random_crop_cuts_windows_of_the_padded_image_per_sample():
    torch.manual_seed(0)
    image = torch.arange(3 * 32 * 32, dtype=torch.float32).view(1, 3, 32, 32)
    out = BatchRandomCrop(32, padding=4)(image.repeat(100, 1, 1, 1))
    padded = torch.nn.functional.pad(image, [4] * 4, mode="reflect")[0]
    windows = {(y, x): padded[:, y : y + 32, x : x + 32] for y in range(9) for x in range(9)}
    offsets = [next(k for k, w in windows.items() if torch.equal(crop, w)) for crop in out]
    assert len(set(offsets)) > 30  # 81 possible offsets, drawn per sample
