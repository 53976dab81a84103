"""The pre-resized uint8 store: every image exactly as decoding and resizing it gives, its label beside it, built
once (a second call and a concurrent caller reuse it), mapped read-only and lazily per process; crops drawn per
sample with torchvision's box; a bad file is named and leaves no store behind."""

from __future__ import annotations

import os
import pickle
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.images import BadImageError, load_rgb_image
from helpers.jpeg_crop import random_resized_crop_box
from helpers.resized_store import (
    ID_BYTES,
    ResizedStore,
    ResizedStoreError,
    StoreCropDataset,
    build_resized_store,
    resized_shape,
)


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


def _samples(folder, shade: int = 0) -> list[tuple[str, int]]:
    folder.mkdir(exist_ok=True)
    samples = []
    for i, (w, h) in enumerate([(40, 30), (30, 40), (32, 32), (50, 20)]):
        path = folder / f"img{i}.bmp"  # BMP: an edit of a pixel keeps the file's size
        Image.fromarray(np.full((h, w, 3), (40 * i + shade) % 256, np.uint8)).save(path)
        samples.append((str(path), i % 2))
    return samples


def _rebuild_with_new_pixels(samples, dest) -> None:
    for path, _ in samples:
        Image.fromarray(np.full((4, 4, 3), 255, np.uint8)).save(path)  # other sizes too: another index
    build_resized_store(samples, dest, short_side=16)


def _edit_keeping_size_and_time(path: str) -> None:
    info = os.stat(path)
    data = bytearray(open(path, "rb").read())
    data[-10] ^= 0xFF  # a pixel of the last row
    with open(path, "r+b") as f:
        f.write(bytes(data))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))  # as cp -p or rsync -t leave it


class TestOneBuildOrAnError:
    """The resized store is one build or an error: a truncated pixels.u8 is refused and built again, a reader (a
    DataLoader worker that maps lazily included) never serves one build's pixels through another build's index (even
    when the two builds have the same sizes: the build identity at the end of pixels.u8 tells them apart), an index of
    another build is refused, and an edit that keeps size and modification time is seen only with content=True."""

    def test_a_truncated_store_is_refused_and_built_again(self, tmp_path):
        samples = _samples(tmp_path / "photos")
        dest = build_resized_store(samples, tmp_path / "store", short_side=16)
        whole = [ResizedStore(dest).image(i).copy() for i in range(len(samples))]
        size = (dest / "pixels.u8").stat().st_size
        os.truncate(dest / "pixels.u8", size // 2)
        with pytest.raises(ResizedStoreError, match=rf"pixels.u8 holds {size // 2} bytes, {size} expected"):
            ResizedStore(dest)
        store = ResizedStore(build_resized_store(samples, dest, short_side=16))
        assert (dest / "pixels.u8").stat().st_size == size
        assert all(np.array_equal(store.image(i), whole[i]) for i in range(len(samples)))

    def test_a_reader_never_serves_another_builds_pixels(self, tmp_path):
        samples = _samples(tmp_path / "photos")
        dest = build_resized_store(samples, tmp_path / "store", short_side=16)
        mapped, lazy = ResizedStore(dest), ResizedStore(dest)
        before = [mapped.image(i).copy() for i in range(len(samples))]  # mapped: holds the old build's file
        in_worker = pickle.loads(pickle.dumps(lazy))  # what a DataLoader worker receives: the index, no mapping
        _rebuild_with_new_pixels(samples, dest)
        assert all(np.array_equal(mapped.image(i), before[i]) for i in range(len(samples)))  # still one build: the old
        for reader in (lazy, in_worker):
            with pytest.raises(ResizedStoreError, match="store was built again after this reader opened it"):
                reader.image(0)
        assert ResizedStore(dest).image(0).shape == (4, 4, 3)  # a reader made now reads the new build

    def test_a_rebuild_of_the_same_sizes_is_caught_by_the_build_identity_when_mapping(self, tmp_path):
        samples = _samples(tmp_path / "photos")
        dest = build_resized_store(samples, tmp_path / "store", short_side=16)
        size = (dest / "pixels.u8").stat().st_size
        in_worker = pickle.loads(
            pickle.dumps(ResizedStore(dest))
        )  # the index and labels of the first build, no mapping
        _samples(
            tmp_path / "photos", shade=100
        )  # the same shapes, other pixels: only the identity tells the builds apart
        build_resized_store([(path, 1 - label) for path, label in samples], dest, short_side=16)
        assert (dest / "pixels.u8").stat().st_size == size
        with pytest.raises(ResizedStoreError, match="pixels.u8 belongs to another build than"):
            in_worker.image(0)

    @pytest.mark.timeout(120)
    def test_a_dataloader_worker_mapping_after_a_rebuild_raises(self, tmp_path):
        samples = _samples(tmp_path / "photos")
        dest = build_resized_store(samples, tmp_path / "store", short_side=16)
        dataset = StoreCropDataset(ResizedStore(dest), 8)
        _rebuild_with_new_pixels(samples, dest)
        loader = torch.utils.data.DataLoader(dataset, batch_size=2, num_workers=1)
        with pytest.raises(ResizedStoreError, match="built again after this reader opened it"):
            list(loader)

    def test_an_index_of_another_build_is_refused(self, tmp_path):
        samples = _samples(tmp_path / "photos")
        first = build_resized_store(samples, tmp_path / "a", short_side=16)
        second = build_resized_store([(p, 1 - label) for p, label in samples], tmp_path / "b", short_side=16)
        shutil.copy(second / "index.npy", first / "index.npy")  # same count, same shapes, other labels
        with pytest.raises(ResizedStoreError, match="index.npy is not the index of the build"):
            ResizedStore(first)
        (first / "pixels.u8").write_bytes((second / "pixels.u8").read_bytes())
        shutil.copy(second / "meta.json", first / "meta.json")
        assert ResizedStore(first).labels.tolist() == [1 - label for _, label in samples]  # all three of one build
        data = bytearray((first / "pixels.u8").read_bytes())
        data[-ID_BYTES:] = bytes(ID_BYTES)
        (first / "pixels.u8").write_bytes(bytes(data))
        with pytest.raises(ResizedStoreError, match="pixels.u8 belongs to another build"):
            ResizedStore(first)

    def test_an_edit_keeping_size_and_time_is_seen_only_with_content(self, tmp_path):
        samples = _samples(tmp_path / "photos")
        for content in (False, True):
            dest = build_resized_store(samples, tmp_path / f"store-{content}", short_side=16, content=content)
            stale = ResizedStore(dest).image(3).copy()
            _edit_keeping_size_and_time(samples[3][0])
            store = ResizedStore(build_resized_store(samples, dest, short_side=16, content=content))
            assert np.array_equal(store.image(3), stale) != content  # stat-only: kept (documented); content: rebuilt


class TestStoreGoneBeforeMapping:
    """A reader whose store disappears before it maps the pixels (removed, or caught between the two renames of a
    rebuild's publish, when the old folder is set aside and the new one not yet in place) gets a ResizedStoreError
    naming the store and what to do, never a bare FileNotFoundError from a DataLoader worker."""

    def test_a_store_set_aside_before_the_pixels_are_mapped_is_named(self, tmp_path):
        (tmp_path / "photos").mkdir()
        Image.fromarray(np.full((20, 30, 3), 9, np.uint8)).save(tmp_path / "photos" / "a.png")
        dest = build_resized_store([(str(tmp_path / "photos" / "a.png"), 0)], tmp_path / "store", short_side=8)
        reader = ResizedStore(dest)
        os.replace(dest, tmp_path / ".store.old")  # what publish does first, before the new folder is renamed in
        with pytest.raises(
            ResizedStoreError, match=r"store: pixels.u8 is gone since this reader opened the store"
        ) as info:
            reader.image(0)
        assert "open it again (ResizedStore)" in str(info.value)
        os.replace(tmp_path / ".store.old", dest)
        assert reader.image(0).shape == (8, 12, 3)


class TestShapesAndLabels:
    """Resized shapes round (not floor), and a stored crop keeps its own label."""

    def test_resized_shapes_round_to_the_nearest_pixel(self):
        assert resized_shape(303, 200, 100) == (152, 100)  # 151.5 rounds up to the even 152, not down to 151
        assert resized_shape(200, 305, 100) == (100, 152)  # 152.5 rounds to 152
        assert resized_shape(40, 30, 100) == (40, 30)  # never enlarged

    def test_each_stored_crop_keeps_its_own_label(self, tmp_path):
        samples = []
        for i in range(3):
            path = tmp_path / f"p{i}.png"
            Image.fromarray(np.full((12, 14, 3), 40 * i, np.uint8)).save(path)
            samples.append((str(path), 2 - i))
        dataset = StoreCropDataset(ResizedStore(build_resized_store(samples, tmp_path / "store", short_side=10)), 8)
        assert [dataset[i][1] for i in range(3)] == [2, 1, 0]
