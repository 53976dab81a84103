"""The resized store is one build or an error: a truncated pixels.u8 is refused and built again, a reader (a
DataLoader worker that maps lazily included) never serves one build's pixels through another build's index (even when
the two builds have the same sizes: the build identity at the end of pixels.u8 tells them apart), an index
of another build is refused, and an edit that keeps size and modification time is seen only with content=True."""

from __future__ import annotations

import os
import pickle
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.resized_store import (
    ID_BYTES,
    ResizedStore,
    ResizedStoreError,
    StoreCropDataset,
    build_resized_store,
)


def _samples(folder, shade: int = 0) -> list[tuple[str, int]]:
    folder.mkdir(exist_ok=True)
    samples = []
    for i, (w, h) in enumerate([(40, 30), (30, 40), (32, 32), (50, 20)]):
        path = folder / f"img{i}.bmp"  # BMP: an edit of a pixel keeps the file's size
        Image.fromarray(np.full((h, w, 3), (40 * i + shade) % 256, np.uint8)).save(path)
        samples.append((str(path), i % 2))
    return samples


def test_a_truncated_store_is_refused_and_built_again(tmp_path):
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


def _rebuild_with_new_pixels(samples, dest) -> None:
    for path, _ in samples:
        Image.fromarray(np.full((4, 4, 3), 255, np.uint8)).save(path)  # other sizes too: another index
    build_resized_store(samples, dest, short_side=16)


def test_a_reader_never_serves_another_builds_pixels(tmp_path):
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


def test_a_rebuild_of_the_same_sizes_is_caught_by_the_build_identity_when_mapping(tmp_path):
    samples = _samples(tmp_path / "photos")
    dest = build_resized_store(samples, tmp_path / "store", short_side=16)
    size = (dest / "pixels.u8").stat().st_size
    in_worker = pickle.loads(pickle.dumps(ResizedStore(dest)))  # the index and labels of the first build, no mapping
    _samples(tmp_path / "photos", shade=100)  # the same shapes, other pixels: only the identity tells the builds apart
    build_resized_store([(path, 1 - label) for path, label in samples], dest, short_side=16)
    assert (dest / "pixels.u8").stat().st_size == size
    with pytest.raises(ResizedStoreError, match="pixels.u8 belongs to another build than"):
        in_worker.image(0)


@pytest.mark.timeout(120)
def test_a_dataloader_worker_mapping_after_a_rebuild_raises(tmp_path):
    samples = _samples(tmp_path / "photos")
    dest = build_resized_store(samples, tmp_path / "store", short_side=16)
    dataset = StoreCropDataset(ResizedStore(dest), 8)
    _rebuild_with_new_pixels(samples, dest)
    loader = torch.utils.data.DataLoader(dataset, batch_size=2, num_workers=1)
    with pytest.raises(ResizedStoreError, match="built again after this reader opened it"):
        list(loader)


def test_an_index_of_another_build_is_refused(tmp_path):
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


def _edit_keeping_size_and_time(path: str) -> None:
    info = os.stat(path)
    data = bytearray(open(path, "rb").read())
    data[-10] ^= 0xFF  # a pixel of the last row
    with open(path, "r+b") as f:
        f.write(bytes(data))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))  # as cp -p or rsync -t leave it


def test_an_edit_keeping_size_and_time_is_seen_only_with_content(tmp_path):
    samples = _samples(tmp_path / "photos")
    for content in (False, True):
        dest = build_resized_store(samples, tmp_path / f"store-{content}", short_side=16, content=content)
        stale = ResizedStore(dest).image(3).copy()
        _edit_keeping_size_and_time(samples[3][0])
        store = ResizedStore(build_resized_store(samples, dest, short_side=16, content=content))
        assert np.array_equal(store.image(3), stale) != content  # stat-only: kept (documented); content: rebuilt
