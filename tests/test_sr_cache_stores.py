"""The on-disk decoded cache checks each store's exact size (a store longer than its metadata says is damaged too,
and is rebuilt with a message); CachedCropLoader's seed decides its crops, its epoch ends with the short last batch,
and a crop wider than an image is refused naming the image."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.images import ImageTooSmallError
from helpers.sr_cache import CachedCropLoader, DecodedSRCache


@pytest.mark.parametrize("store", ["hr.u8", "lr.u8"])
def test_a_store_longer_than_its_metadata_is_rebuilt(tmp_path, store):
    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    for i in range(2):
        Image.fromarray(rng.integers(0, 256, (22, 26, 3), dtype=np.uint8)).save(photos / f"p{i}.png")
    cache = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    lr, hr = (t.clone() for t in cache.image(1))
    path = cache.cache_folder / store
    size = path.stat().st_size
    del cache
    with open(path, "ab") as f:
        f.write(b"\0" * 64)
    with pytest.warns(UserWarning, match=rf"{store} holds {size + 64} bytes, {size} expected.*rebuilding"):
        again = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    assert again.rebuilt and path.stat().st_size == size
    assert torch.equal(again.image(1)[0], lr) and torch.equal(again.image(1)[1], hr)


def _cache(tmp_path, sizes) -> DecodedSRCache:
    folder = tmp_path / "small"
    folder.mkdir()
    rng = np.random.default_rng(1)
    for i, (width, height) in enumerate(sizes):
        Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(folder / f"s{i}.png")
    return DecodedSRCache(folder, scale=2)


def test_the_cached_loaders_seed_decides_its_crops_and_its_epoch_ends_short(tmp_path):
    cache = _cache(tmp_path, [(24, 20)] * 6)

    def batches(seed: int) -> list[torch.Tensor]:
        return [hr for _, hr in CachedCropLoader(cache, batch_size=4, hr_crop=8, seed=seed, as_float=False)]

    first = batches(0)
    assert [len(hr) for hr in first] == [4, 2]  # 6 images: a full batch, then the short last one
    assert all(torch.equal(a, b) for a, b in zip(first, batches(0)))
    assert not all(torch.equal(a, b) for a, b in zip(first, batches(1)))


def test_a_crop_wider_than_an_image_names_it(tmp_path):
    cache = _cache(tmp_path, [(40, 60), (12, 60)])  # the second is tall enough, not wide enough
    with pytest.raises(ImageTooSmallError, match=r"s1.png: image is 12x60 pixels, smaller than the 16x16 crop"):
        cache.sample(2, hr_crop=16, generator=torch.Generator().manual_seed(0))


def test_the_device_loaders_y_channel_is_pils_y_of_its_rgb_crop(tmp_path):
    from helpers.sr_cache import DeviceSRCropLoader

    cache = _cache(tmp_path, [(24, 20)] * 3)
    common = dict(batch_size=3, hr_crop=8, batches_per_epoch=1, seed=0, augment=False)
    ((_, rgb),) = list(DeviceSRCropLoader(cache, **common))
    ((lr, y),) = list(DeviceSRCropLoader(cache, channels="y", **common))
    assert y.shape == (3, 1, 8, 8) and lr.shape == (3, 1, 4, 4)
    for crop, luma in zip(rgb, y):
        pixels = (crop * 255).round().to(torch.uint8).permute(1, 2, 0).numpy()
        expected = np.array(Image.fromarray(pixels).convert("YCbCr").getchannel(0))
        assert torch.equal((luma[0] * 255).round().to(torch.uint8), torch.from_numpy(expected))


def test_the_device_loaders_seed_decides_its_crops(tmp_path):
    from helpers.sr_cache import DeviceSRCropLoader

    cache = _cache(tmp_path, [(64, 48), (80, 64)])

    def crops(seed):
        loader = DeviceSRCropLoader(cache, batch_size=4, hr_crop=16, batches_per_epoch=2, seed=seed)
        return torch.cat([hr for _, hr in loader])

    assert torch.equal(crops(1), crops(1)) and not torch.equal(crops(1), crops(2))
