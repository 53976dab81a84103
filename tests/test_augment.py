"""Device-side augmentation and whole-dataset-on-device loaders."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.augment import PairedSRAugment, cifar_train_augment, normalize_only, paired_dihedral
from helpers.datasets import DecodedSRCache, DeviceSRCropLoader, bicubic_downscale
from helpers.loading import DeviceTensorLoader


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


def test_paired_dihedral_keeps_pairs_aligned():
    torch.manual_seed(0)
    hr = torch.rand(32, 3, 16, 16)
    lr = bicubic_downscale(hr, 4)
    aug_lr, aug_hr = paired_dihedral(lr, hr, torch.Generator().manual_seed(1))
    torch.testing.assert_close(bicubic_downscale(aug_hr, 4), aug_lr, atol=1e-5, rtol=0)
    changed = [not torch.equal(a, b) for a, b in zip(aug_hr, hr)]
    assert 20 < sum(changed) < 32  # 7 of 8 transforms change a sample; each sample drew its own


def test_paired_sr_augment_applies_the_same_colour_change():
    torch.manual_seed(0)
    hr = torch.rand(16, 3, 16, 16)
    lr = bicubic_downscale(hr, 4)
    aug_lr, aug_hr = PairedSRAugment(jitter=0.4, jitter_p=1.0)(lr, hr)
    # brightness/contrast/saturation act per pixel and on image means; downscaling commutes closely enough
    gap = (bicubic_downscale(aug_hr, 4) - aug_lr).abs().mean()
    assert gap < 0.02
    assert (aug_hr - hr).abs().mean() > 0.02  # and the colours did change


def test_device_tensor_loader_gives_every_sample_once_per_epoch():
    images = torch.arange(103, dtype=torch.uint8).reshape(103, 1, 1, 1).expand(103, 3, 4, 4).contiguous()
    labels = torch.arange(103)
    loader = DeviceTensorLoader(images, labels, batch_size=10, seed=0)
    assert len(loader) == 11
    for _ in range(2):
        seen = torch.cat([y for _, y in loader])
        assert sorted(seen.tolist()) == list(range(103))
        for x, y in loader:
            assert torch.equal(x[:, 0, 0, 0].long(), y)  # images stay with their labels
    orders = [torch.cat([y for _, y in loader]) for _ in range(2)]
    assert not torch.equal(orders[0], orders[1])  # reshuffled every epoch
    again = DeviceTensorLoader(images, labels, batch_size=10, seed=0)
    assert torch.equal(torch.cat([y for _, y in again]), torch.cat([y for _, y in DeviceTensorLoader(images, labels, 10, seed=0)]))
    assert len(DeviceTensorLoader(images, labels, batch_size=10, drop_last=True)) == 10


def test_device_sr_crop_loader_pairs_align(tmp_path):
    rng = np.random.default_rng(0)
    for i in range(3):
        smooth = rng.integers(0, 256, (40, 50, 3)).astype(np.uint8)
        Image.fromarray(smooth).resize((200, 160), Image.Resampling.BICUBIC).save(tmp_path / f"{i}.png")
    loader = DeviceSRCropLoader(DecodedSRCache(tmp_path, 4), batch_size=8, hr_crop=64, batches_per_epoch=2, seed=0)
    batches = list(loader)
    assert len(batches) == 2
    lr, hr = batches[0]
    assert lr.shape == (8, 3, 16, 16) and hr.shape == (8, 3, 64, 64) and hr.dtype == torch.float32
    torch.testing.assert_close(bicubic_downscale(hr, 4), lr, atol=1e-5, rtol=0)
    # crops really come from the images: each HR crop matches a window of its source at a scale-aligned origin
    cache = DecodedSRCache(tmp_path, 4)
    found = 0
    for crop in hr[:4]:
        for index in range(len(cache)):
            whole = cache.image(index)[1].float() / 255
            for choice in range(8):
                from helpers.datasets import dihedral

                undone = crop
                # try every inverse transform, every aligned origin
                candidate = dihedral(undone, choice)
                windows = whole.unfold(1, 64, 4).unfold(2, 64, 4)  # (3, ny, nx, 64, 64)
                match = (windows - candidate[:, None, None]).abs().amax(dim=(0, 3, 4)).min()
                if match < 1e-6:
                    found += 1
                    break
            else:
                continue
            break
    assert found == 4


def test_batch_random_crop_cuts_windows_of_the_padded_image_per_sample():
    from helpers.augment import BatchRandomCrop

    torch.manual_seed(0)
    image = torch.arange(3 * 32 * 32, dtype=torch.float32).view(1, 3, 32, 32)
    out = BatchRandomCrop(32, padding=4)(image.repeat(100, 1, 1, 1))
    padded = torch.nn.functional.pad(image, [4] * 4, mode="reflect")[0]
    windows = {(y, x): padded[:, y : y + 32, x : x + 32] for y in range(9) for x in range(9)}
    offsets = [next(k for k, w in windows.items() if torch.equal(crop, w)) for crop in out]
    assert len(set(offsets)) > 30  # 81 possible offsets, drawn per sample
