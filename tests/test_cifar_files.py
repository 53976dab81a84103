"""The CIFAR-10 reader opens each file once, non-blocking, and checks the descriptor (so a FIFO put there right after
an existence check cannot block it, and /dev/zero is never read), and its writers go through a fresh scratch file
and one rename: a link planted at the destination is replaced, never written through, a FIFO there never blocks
them, and a reader sees the old file or the new one, never half."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from helpers.cifar import (
    CifarFormatError,
    cifar10_class_names,
    read_cifar10_batch,
    write_cifar10_batch,
    write_cifar10_class_names,
)

from .test_safe_open_routing import _within

IMAGES, LABELS = np.arange(2 * 3072, dtype=np.uint32).astype(np.uint8).reshape(2, 3, 32, 32), np.array([3, 7])


def test_a_fifo_swapped_in_after_an_existence_check_cannot_block_the_read(tmp_path, monkeypatch):
    path = write_cifar10_batch(tmp_path / "data_batch_1.bin", IMAGES, LABELS)
    real_is_file = Path.is_file

    def is_file_then_swap(self: Path) -> bool:  # the race, made certain: the file becomes a FIFO just after a check
        found = real_is_file(self)
        if self == path and found:
            os.replace(path, tmp_path / "kept.bin")
            os.mkfifo(path)
        return found

    monkeypatch.setattr(Path, "is_file", is_file_then_swap)
    images, labels = _within(20, lambda: read_cifar10_batch(path))  # type: ignore[misc]
    assert np.array_equal(images.numpy(), IMAGES) and labels.tolist() == [3, 7]


@pytest.mark.timeout(60)
def test_a_link_to_a_device_as_the_class_names_is_named_not_read(tmp_path):
    os.symlink("/dev/zero", tmp_path / "batches.meta.txt")
    with pytest.raises(CifarFormatError, match="batches.meta.txt: not a regular file"):
        _within(20, lambda: cifar10_class_names(tmp_path))
    (tmp_path / "batches.meta.txt").unlink()
    (tmp_path / "batches.meta.txt").write_bytes(b"cat\n" * 100_000)
    with pytest.raises(CifarFormatError, match="batches.meta.txt: over 65536 bytes, not a file of class names"):
        cifar10_class_names(tmp_path)


def test_the_writers_replace_a_planted_link_and_never_write_through_it(tmp_path):
    (tmp_path / "victim").write_text("precious")
    for name in ("data_batch_1.bin", "batches.meta.txt"):
        os.symlink(tmp_path / "victim", tmp_path / name)
    write_cifar10_batch(tmp_path / "data_batch_1.bin", IMAGES, LABELS)
    write_cifar10_class_names(tmp_path / "batches.meta.txt", [f"c{i}" for i in range(10)])
    assert (tmp_path / "victim").read_text() == "precious"
    assert not os.path.islink(tmp_path / "data_batch_1.bin") and read_cifar10_batch(tmp_path / "data_batch_1.bin")
    assert cifar10_class_names(tmp_path) == [f"c{i}" for i in range(10)]
    assert sorted(os.listdir(tmp_path)) == ["batches.meta.txt", "data_batch_1.bin", "victim"]  # no scratch left


@pytest.mark.timeout(60)
def test_a_fifo_at_the_destination_never_blocks_a_writer(tmp_path):
    os.mkfifo(tmp_path / "data_batch_1.bin")
    _within(20, lambda: write_cifar10_batch(tmp_path / "data_batch_1.bin", IMAGES, LABELS))
    assert read_cifar10_batch(tmp_path / "data_batch_1.bin")[1].tolist() == [3, 7]
    (tmp_path / "test_batch.bin").mkdir()
    with pytest.raises(CifarFormatError, match="test_batch.bin: is a folder, where the file goes"):
        write_cifar10_batch(tmp_path / "test_batch.bin", IMAGES, LABELS)
