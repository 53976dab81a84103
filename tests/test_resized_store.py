"""The pre-resized uint8 store: every image exactly as decoding and resizing it gives, its label beside it, built
once (a second call and a concurrent caller reuse it), mapped read-only and lazily per process; crops drawn per
sample with torchvision's box; a bad file is named and leaves no store behind."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.images import BadImageError, load_rgb_image
from helpers.jpeg_crop import random_resized_crop_box
from helpers.resized_store import ResizedStore, StoreCropDataset, build_resized_store, resized_shape


@pytest.fixture()
def samples(tmp_path) -> list[tuple[str, int]]:
    rng = np.random.default_rng(0)
    made = []
    for i, (w, h) in enumerate([(120, 90), (90, 120), (64, 64), (200, 50), (40, 30), (100, 75)]):
        path = tmp_path / f"img{i}.jpg"
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path, quality=90)
        made.append((str(path), i % 2))
    return made


def test_resized_shape_keeps_the_aspect_and_never_enlarges():
    assert resized_shape(500, 375, 256) == (341, 256)
    assert resized_shape(375, 500, 256) == (256, 341)
    assert resized_shape(40, 30, 64) == (40, 30)


def test_the_store_holds_each_image_as_decoding_and_resizing_gives(samples, tmp_path):
    store = ResizedStore(build_resized_store(samples, tmp_path / "store", short_side=48, classes=["a", "b"]))
    assert len(store) == len(samples) and store.meta["classes"] == ["a", "b"]
    for i, (path, label) in enumerate(samples):
        image = load_rgb_image(path)
        size = resized_shape(*image.size, 48)
        expected = np.asarray(image.resize(size, Image.Resampling.BILINEAR) if size != image.size else image)
        assert np.array_equal(store.image(i), expected), path
        assert store.labels[i] == label
    assert not store.image(0).flags.writeable


def test_the_store_is_built_once(samples, tmp_path):
    dest = tmp_path / "store"
    build_resized_store(samples, dest, short_side=48)
    stamp = (dest / "pixels.u8").stat().st_mtime_ns
    build_resized_store(samples, dest, short_side=48)
    assert (dest / "pixels.u8").stat().st_mtime_ns == stamp  # complete: not rebuilt
    build_resized_store(samples, dest, short_side=32)  # another size: rebuilt
    assert ResizedStore(dest).meta["short_side"] == 32


def test_the_mapping_is_per_process_not_pickled(samples, tmp_path):
    store = ResizedStore(build_resized_store(samples, tmp_path / "store", short_side=48))
    store.image(0)
    copy = pickle.loads(pickle.dumps(store))
    assert copy._pixels is None and np.array_equal(copy.image(1), store.image(1))


def test_crops_use_torchvisions_box_per_sample(samples, tmp_path):
    store = ResizedStore(build_resized_store(samples, tmp_path / "store", short_side=48))
    dataset = StoreCropDataset(store, size=24, flip=False)
    torch.manual_seed(5)
    crop, label = dataset[0]
    torch.manual_seed(5)
    pixels = store.image(0)
    top, left, h, w = random_resized_crop_box(pixels.shape[1], pixels.shape[0])
    expected = np.array(
        Image.fromarray(pixels[top : top + h, left : left + w]).resize((24, 24), Image.Resampling.BILINEAR)
    )
    assert crop.dtype == torch.uint8 and torch.equal(crop, torch.from_numpy(expected).permute(2, 0, 1))
    assert label == samples[0][1]
    assert len({dataset[0][0].numpy().tobytes() for _ in range(8)}) > 4


def test_a_bad_file_is_named_and_no_store_is_left(samples, tmp_path):
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(open(samples[0][0], "rb").read()[:200])
    with pytest.raises(BadImageError, match="broken.jpg"):
        build_resized_store(samples + [(str(broken), 0)], tmp_path / "store", short_side=48)
    assert not (tmp_path / "store").exists()
    with pytest.raises(FileNotFoundError, match="build_resized_store"):
        ResizedStore(tmp_path / "store")


def test_a_store_is_built_again_when_a_source_changes_and_kept_when_none_does(samples, tmp_path):
    dest = tmp_path / "store"
    build_resized_store(samples, dest, short_side=48)
    stamp = (dest / "meta.json").stat().st_mtime_ns
    build_resized_store(samples, dest, short_side=48)
    assert (dest / "meta.json").stat().st_mtime_ns == stamp  # the same files: kept
    path = samples[2][0]  # replaced by another image of the same size: same count, same shape, new pixels
    Image.fromarray(np.full((64, 64, 3), 7, np.uint8)).save(path, quality=90)
    store = ResizedStore(build_resized_store(samples, dest, short_side=48))
    np.testing.assert_array_equal(store.image(2), np.asarray(load_rgb_image(path).resize((48, 48), Image.BILINEAR)))
    relabelled = [(p, 1 - label) for p, label in samples]
    assert ResizedStore(build_resized_store(relabelled, dest, short_side=48)).labels.tolist() == [
        label for _, label in relabelled
    ]


def test_about_half_the_store_crops_are_flipped(samples, tmp_path):
    """A flip drawn per sample: a symmetric crop (scale and ratio fixed to the whole image) flipped or not."""
    store = ResizedStore(build_resized_store(samples[2:3], tmp_path / "store", short_side=48))
    dataset = StoreCropDataset(store, 16, scale=(1.0, 1.0), ratio=(1.0, 1.0))
    torch.manual_seed(0)
    plain = StoreCropDataset(store, 16, scale=(1.0, 1.0), ratio=(1.0, 1.0), flip=False)[0][0]
    flipped = sum(torch.equal(dataset[0][0], plain.flip(-1)) for _ in range(200))
    assert 70 <= flipped <= 130  # Binomial(200, 0.5): outside this range once in ~10^4 runs
