"""The offline stand-ins are written in the real formats, so the same loaders read them, and no SR test pixel is ever
in a training image (tests/course/test_data.py has processes writing the same stand-in at once)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from helpers.cifar import RECORD_BYTES, cifar10_class_names, load_cifar10
from helpers.course.data import bsds300_split, check_bsds300_layout, prepare_bsds300, prepare_cifar10
from helpers.course.standins import (
    PHOTO_FILES,
    STANDIN_MARKER,
    skimage_photo,
    sr_standin_tiles,
    write_sr_standin,
)


def test_sr_standin_has_the_bsds300_layout(tmp_path):
    source = prepare_bsds300(tmp_path, offline=True)
    assert source.is_standin and "stand-in" in source.name and "COURSE_OFFLINE" in source.note
    counts = check_bsds300_layout(source.root)
    assert 15 <= counts["train"] <= 25 and counts["test"] >= 10  # training stays small; ten held-out test images
    for split in ("train", "test"):
        ids = (source.root / f"iids_{split}.txt").read_text().split()
        assert sorted(ids) == sorted(p.stem for p in bsds300_split(source.root, split))
    for path in bsds300_split(source.root, "train"):
        with Image.open(path) as image:
            assert image.format == "JPEG" and image.mode == "RGB" and sorted(image.size) == [321, 481]
    assert (source.root / STANDIN_MARKER).is_file()


def test_no_test_pixel_is_in_a_training_image(tmp_path):
    tiles = sr_standin_tiles()
    photos = {tile.photo for tile in tiles}
    sources = {photo: skimage_photo(photo) for photo in photos}
    seen_in_training = {photo: np.zeros(sources[photo].shape[:2], bool) for photo in photos}
    for tile in tiles:
        if tile.split == "train":
            seen_in_training[tile.photo][tile.y : tile.y + tile.height, tile.x : tile.x + tile.width] = True
    test_tiles = [tile for tile in tiles if tile.split == "test"]
    assert len(test_tiles) >= 10
    for tile in test_tiles:
        window = seen_in_training[tile.photo][tile.y : tile.y + tile.height, tile.x : tile.x + tile.width]
        assert not window.any(), f"{tile.image_id}: {int(window.sum())} of its pixels are in a training image"
    # and the files are what the plan says: each image is its window of its photograph (within JPEG error)
    root = write_sr_standin(tmp_path / "BSDS300")
    written = {p.stem: p for split in ("train", "test") for p in bsds300_split(root, split)}
    assert sorted(written) == sorted(tile.image_id for tile in tiles)
    for tile in tiles:
        path = written[tile.image_id]
        assert path.parent.name == tile.split
        pixels = np.asarray(Image.open(path).convert("RGB")).astype(int)
        window = sources[tile.photo][tile.y : tile.y + tile.height, tile.x : tile.x + tile.width].astype(int)
        assert pixels.shape == window.shape and np.abs(pixels - window).mean() < 3, tile.image_id


def test_cifar_standin_is_in_the_binary_format_and_reads_with_load_cifar10(tmp_path):
    source = prepare_cifar10(tmp_path, offline=True)
    assert source.is_standin and source.root.name == "cifar-10-batches-bin"
    assert sorted(p.name for p in source.root.glob("*.bin")) == [
        *(f"data_batch_{i}.bin" for i in range(1, 6)),
        "test_batch.bin",
    ]
    assert all(p.stat().st_size % RECORD_BYTES == 0 for p in source.root.glob("*.bin"))
    images, labels = load_cifar10(source.root, train=True)
    test_images, test_labels = load_cifar10(source.root, train=False)
    assert images.shape == (5000, 3, 32, 32) and test_images.shape == (1000, 3, 32, 32)
    assert np.bincount(labels.numpy()).tolist() == [500] * 10
    assert np.bincount(test_labels.numpy()).tolist() == [100] * 10
    assert len(set(cifar10_class_names(source.root))) == 10
    assert images.float().std() > 20  # real pixels, not a constant fill


def test_standin_is_reused_not_rewritten(tmp_path):
    first = prepare_bsds300(tmp_path, offline=True)
    stamp = (first.root / STANDIN_MARKER).stat().st_mtime_ns
    second = prepare_bsds300(tmp_path, offline=True)
    assert (second.root / STANDIN_MARKER).stat().st_mtime_ns == stamp


def test_an_older_standin_is_rewritten(tmp_path):
    old = tmp_path / "standin" / "BSDS300"
    (old / "images" / "test").mkdir(parents=True)
    (old / "images" / "train").mkdir(parents=True)
    (old / STANDIN_MARKER).write_text("stand-in version 1\n")
    source = prepare_bsds300(tmp_path, offline=True)
    assert check_bsds300_layout(source.root)["test"] >= 10


def test_the_photographs_are_skimage_datas_pixels_read_without_scipy():
    """skimage_photo reads the wheel's files with PIL (skimage.data's loaders import SciPy, which the GPU check's
    wheelhouse leaves out): the same pixels as skimage.data, greyscale repeated to RGB."""
    skdata = pytest.importorskip("skimage.data")
    for name in sorted(PHOTO_FILES):
        if name.startswith("motorcycle"):
            left, right, _ = skdata.stereo_motorcycle()
            expected = np.asarray(left if name == "motorcycle_left" else right)
        else:
            expected = np.asarray(getattr(skdata, name)())
        if expected.ndim == 2:
            expected = np.stack([expected] * 3, axis=-1)
        photo = skimage_photo(name)
        assert photo.dtype == np.uint8 and np.array_equal(photo, expected[..., :3]), name
    with pytest.raises(ValueError, match="no stand-in photograph 'lena'"):
        skimage_photo("lena")
