"""The on-disk decoded cache checks each store's exact size: a store longer than its metadata says is damaged too,
and is rebuilt with a message."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.sr_cache import DecodedSRCache


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
