"""The decoded uint8 cache and its loaders: aligned pairs within rounding, a disk cache reused and rebuilt, the zero-CPU
device loader, and the background prefetcher."""

from __future__ import annotations

import shutil
import threading

import numpy as np
import torch
from PIL import Image

from helpers.sr_cache import BackgroundPrefetcher, CachedCropLoader, DecodedSRCache, DeviceSRCropLoader
from helpers.sr_data import bicubic_downscale, dihedral

from .conftest import interior_gap, shifted_gap


def test_cache_pairs_align_within_uint8_rounding(photo_dir):
    cache = DecodedSRCache(photo_dir, scale=4)
    lr, hr = cache.sample(32, hr_crop=64, generator=torch.Generator().manual_seed(0))
    assert lr.dtype == torch.uint8 and lr.shape == (32, 3, 16, 16) and hr.shape == (32, 3, 64, 64)
    lr, hr = lr.float() / 255, hr.float() / 255
    # the cache makes LR from uint8 as MATLAB does, rounding and saturating after each pass: a few levels at edges
    assert interior_gap(lr, hr, 4) <= 4 / 255
    assert shifted_gap(lr, hr, 4) > 10 / 255  # and a one-pixel shift would be plainly visible


def test_disk_cache_is_reused_then_rebuilt_when_a_source_changes(photo_dir, tmp_path):
    photos = tmp_path / "photos"
    shutil.copytree(photo_dir, photos)
    first = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    assert first.rebuilt
    second = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    assert not second.rebuilt and torch.equal(first.image(1)[1], second.image(1)[1])
    changed = photos / "img1.png"
    Image.fromarray(np.full((481, 321, 3), 200, np.uint8)).save(changed)
    third = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    assert third.rebuilt and int(third.image(1)[1].float().mean().round()) == 200


def test_cached_loader_yields_float_batches(photo_dir):
    loader = CachedCropLoader(DecodedSRCache(photo_dir, scale=4), batch_size=8, hr_crop=64, batches_per_epoch=3, seed=1)
    batches = list(loader)
    assert len(batches) == 3 and batches[0][0].dtype == torch.float32 and batches[0][1].shape == (8, 3, 64, 64)
    again = list(CachedCropLoader(DecodedSRCache(photo_dir, scale=4), batch_size=8, hr_crop=64, batches_per_epoch=3, seed=1))
    assert all(torch.equal(a[1], b[1]) for a, b in zip(batches, again))


def test_cache_batches_where_every_sample_is_turned(photo_dir):
    # A batch whose every crop is transposed once came out Fortran-ordered and could not be viewed as bytes.
    cache = DecodedSRCache(photo_dir, scale=4)
    for seed in range(40):
        lr, hr = cache.sample(1, hr_crop=64, generator=torch.Generator().manual_seed(seed))
        assert lr.shape == (1, 3, 16, 16) and hr.shape == (1, 3, 64, 64)


def test_device_sr_crop_loader_pairs_align(tmp_path):
    rng = np.random.default_rng(0)
    for i in range(3):
        smooth = rng.integers(0, 256, (40, 50, 3)).astype(np.uint8)
        Image.fromarray(smooth).resize((200, 160), Image.Resampling.BICUBIC).save(tmp_path / f"{i}.png")
    loader = DeviceSRCropLoader(DecodedSRCache(tmp_path, scale=4), batch_size=8, hr_crop=64, batches_per_epoch=2, seed=0)
    batches = list(loader)
    assert len(batches) == 2
    lr, hr = batches[0]
    assert lr.shape == (8, 3, 16, 16) and hr.shape == (8, 3, 64, 64) and hr.dtype == torch.float32
    torch.testing.assert_close(bicubic_downscale(hr, 4), lr, atol=1e-5, rtol=0)
    # crops really come from the images: each HR crop matches a window of its source at a scale-aligned origin
    cache = DecodedSRCache(tmp_path, scale=4)
    found = 0
    for crop in hr[:4]:
        for index in range(len(cache)):
            whole = cache.image(index)[1].float() / 255
            for choice in range(8):
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


def test_background_prefetcher_yields_everything_in_order_and_reraises():
    assert list(BackgroundPrefetcher(range(10), depth=2)) == list(range(10))

    def broken():
        yield 1
        raise OSError("disk went away")

    items = iter(BackgroundPrefetcher(broken()))
    assert next(items) == 1
    try:
        next(items)
    except OSError as error:
        assert "disk went away" in str(error)
    else:
        raise AssertionError("the producer's error was swallowed")


def test_background_prefetcher_stops_when_the_consumer_stops():
    before = threading.active_count()
    iterator = iter(BackgroundPrefetcher(iter(range(10**9)), depth=2))
    assert next(iterator) == 0
    iterator.close()  # the consumer walks away mid-stream
    assert threading.active_count() == before
