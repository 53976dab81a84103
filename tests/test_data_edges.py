"""Edges of the data files: a 32-bit integer image past 16-bit values is refused, a class-name file with too many
names is refused, resized shapes round (not floor), and a stored crop keeps its own label."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from helpers.cifar import CifarFormatError, cifar10_class_names
from helpers.images import BadImageError, load_rgb_image
from helpers.resized_store import ResizedStore, StoreCropDataset, build_resized_store, resized_shape


def test_an_integer_image_past_16_bit_values_is_refused(tmp_path):
    Image.fromarray(np.array([[0, 70000]], dtype=np.int32)).save(tmp_path / "wide.tiff")
    with pytest.raises(BadImageError, match=r"wide.tiff: mode I holds values 0..70000, outside 16-bit"):
        load_rgb_image(tmp_path / "wide.tiff")


def test_a_class_name_file_with_eleven_names_is_refused(tmp_path):
    (tmp_path / "batches.meta.txt").write_text("\n".join(f"c{i}" for i in range(11)) + "\n", encoding="ascii")
    with pytest.raises(CifarFormatError, match="11 class names, expected 10"):
        cifar10_class_names(tmp_path)


def test_resized_shapes_round_to_the_nearest_pixel():
    assert resized_shape(303, 200, 100) == (152, 100)  # 151.5 rounds up to the even 152, not down to 151
    assert resized_shape(200, 305, 100) == (100, 152)  # 152.5 rounds to 152
    assert resized_shape(40, 30, 100) == (40, 30)  # never enlarged


def test_each_stored_crop_keeps_its_own_label(tmp_path):
    samples = []
    for i in range(3):
        path = tmp_path / f"p{i}.png"
        Image.fromarray(np.full((12, 14, 3), 40 * i, np.uint8)).save(path)
        samples.append((str(path), 2 - i))
    dataset = StoreCropDataset(ResizedStore(build_resized_store(samples, tmp_path / "store", short_side=10)), 8)
    assert [dataset[i][1] for i in range(3)] == [2, 1, 0]
