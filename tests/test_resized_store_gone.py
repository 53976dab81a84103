"""A reader whose store disappears before it maps the pixels (removed, or caught between the two renames of a
rebuild's publish, when the old folder is set aside and the new one not yet in place) gets a ResizedStoreError naming
the store and what to do, never a bare FileNotFoundError from a DataLoader worker."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from helpers.resized_store import ResizedStore, ResizedStoreError, build_resized_store


def test_a_store_set_aside_before_the_pixels_are_mapped_is_named(tmp_path):
    (tmp_path / "photos").mkdir()
    Image.fromarray(np.full((20, 30, 3), 9, np.uint8)).save(tmp_path / "photos" / "a.png")
    dest = build_resized_store([(str(tmp_path / "photos" / "a.png"), 0)], tmp_path / "store", short_side=8)
    reader = ResizedStore(dest)
    os.replace(dest, tmp_path / ".store.old")  # what publish does first, before the new folder is renamed in
    with pytest.raises(ResizedStoreError, match=r"store: pixels.u8 is gone since this reader opened the store") as info:
        reader.image(0)
    assert "open it again (ResizedStore)" in str(info.value)
    os.replace(tmp_path / ".store.old", dest)
    assert reader.image(0).shape == (8, 12, 3)
