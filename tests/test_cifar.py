"""CIFAR-10 in its binary format: arrays equal to an independent parse of the records, every malformed file a clear
error naming it, a writer that refuses labels it cannot store faithfully, and no pickle anywhere in the package."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.cifar import (
    CIFAR10_FOLDER,
    RECORD_BYTES,
    CifarFormatError,
    check_cifar10_folder,
    cifar10_class_names,
    load_cifar10,
    read_cifar10_batch,
    write_cifar10_batch,
    write_cifar10_class_names,
)

from .test_safe_open import _within

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def cifar_batch_bytes(count: int, seed: int = 0, label_offset: int = 0) -> bytes:
    """A CIFAR-10 binary batch of `count` random records, built byte by byte as the authors describe the format."""
    rng = np.random.default_rng(seed)
    out = bytearray()
    for i in range(count):
        out.append((i + label_offset) % 10)  # 1 label byte
        out += rng.integers(0, 256, 3072, dtype=np.uint8).tobytes()  # 1024 R, 1024 G, 1024 B, row-major
    return bytes(out)


def write_folder(folder: Path, counts: dict[str, int] | None = None) -> Path:
    """A CIFAR-10 binary folder with small batches (default 2-6 records) and the class names."""
    folder.mkdir(parents=True, exist_ok=True)
    counts = counts or {f"data_batch_{i}.bin": 1 + i for i in range(1, 6)} | {"test_batch.bin": 4}
    for offset, (name, count) in enumerate(counts.items()):
        (folder / name).write_bytes(cifar_batch_bytes(count, seed=offset, label_offset=offset))
    (folder / "batches.meta.txt").write_text("\n".join(NAMES) + "\n\n")  # the real file ends with blank lines
    return folder


def test_load_cifar10_matches_an_independent_parse_of_the_records(tmp_path):
    folder = write_folder(tmp_path / CIFAR10_FOLDER)
    images, labels = load_cifar10(tmp_path, train=True)
    expected_images, expected_labels = [], []
    for i in range(1, 6):
        raw = (folder / f"data_batch_{i}.bin").read_bytes()
        for start in range(0, len(raw), RECORD_BYTES):
            expected_labels.append(raw[start])
            pixels = np.array(list(raw[start + 1 : start + RECORD_BYTES]), dtype=np.uint8)
            expected_images.append(np.stack([pixels[c * 1024 : (c + 1) * 1024].reshape(32, 32) for c in range(3)]))
    assert images.dtype == torch.uint8 and images.shape == (sum(1 + i for i in range(1, 6)), 3, 32, 32)
    assert labels.dtype == torch.int64 and labels.tolist() == expected_labels
    assert np.array_equal(images.numpy(), np.stack(expected_images))
    images.add_(1)  # a writable tensor of its own, not a view of a read-only buffer
    test_images, test_labels = load_cifar10(folder, train=False)  # the batches folder itself works too
    assert test_images.shape == (4, 3, 32, 32) and len(test_labels) == 4
    assert cifar10_class_names(tmp_path) == NAMES
    assert check_cifar10_folder(folder) == {"train": 20, "test": 4}


def test_the_writer_and_the_reader_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    images = torch.from_numpy(rng.integers(0, 256, (7, 3, 32, 32), dtype=np.uint8))
    labels = torch.tensor([0, 9, 3, 3, 1, 5, 7])
    path = write_cifar10_batch(tmp_path / "b.bin", images, labels)
    assert path.stat().st_size == 7 * RECORD_BYTES
    got_images, got_labels = read_cifar10_batch(path)
    assert torch.equal(got_images, images) and torch.equal(got_labels, labels)
    write_cifar10_class_names(tmp_path / "batches.meta.txt", NAMES)
    assert cifar10_class_names(tmp_path) == NAMES


@pytest.mark.parametrize("size", [0, RECORD_BYTES - 1, 3 * RECORD_BYTES + 100])
def test_a_file_that_is_not_whole_records_is_named(tmp_path, size):
    folder = write_folder(tmp_path / CIFAR10_FOLDER)
    (folder / "data_batch_3.bin").write_bytes(bytes(size))
    with pytest.raises(CifarFormatError, match=rf"data_batch_3.bin: {size} bytes is not a whole number of 3073"):
        load_cifar10(tmp_path)


@pytest.mark.parametrize("label", [10, 255])
def test_a_label_outside_0_to_9_is_named_with_its_record(tmp_path, label):
    folder = write_folder(tmp_path / CIFAR10_FOLDER)
    raw = bytearray((folder / "test_batch.bin").read_bytes())
    raw[2 * RECORD_BYTES] = label
    (folder / "test_batch.bin").write_bytes(bytes(raw))
    with pytest.raises(CifarFormatError, match=rf"test_batch.bin: record 2 has label {label}, outside 0..9"):
        load_cifar10(tmp_path, train=False)


def test_missing_batches_and_class_names_are_named(tmp_path):
    folder = write_folder(tmp_path / CIFAR10_FOLDER)
    (folder / "data_batch_2.bin").unlink()
    with pytest.raises(CifarFormatError, match="data_batch_2.bin: missing"):
        load_cifar10(tmp_path)
    (folder / "batches.meta.txt").write_text("airplane\nautomobile\n")
    with pytest.raises(CifarFormatError, match="batches.meta.txt: 2 class names, expected 10"):
        cifar10_class_names(folder)
    (folder / "batches.meta.txt").unlink()
    with pytest.raises(CifarFormatError, match="batches.meta.txt: missing"):
        cifar10_class_names(folder)


@pytest.mark.parametrize(
    ("labels", "problem"),
    [
        (np.array([0.0, 1.5, 2.0]), "integers"),  # float labels: never silently truncated
        (np.array(["0", "1", "2"]), "integers"),  # string labels: refused
        (np.array([0, 1]), "integers"),  # one label short
        (np.array([0, 1, 10]), "0..9"),
        (np.array([0, -1, 2]), "0..9"),
        (np.array([0, 1, 2**40]), "0..9"),  # huge: no overflow into a byte
    ],
)
def test_the_writer_refuses_labels_it_cannot_store(tmp_path, labels, problem):
    images = np.zeros((3, 3, 32, 32), np.uint8)
    with pytest.raises(CifarFormatError, match=problem) as info:
        write_cifar10_batch(tmp_path / "bad.bin", images, labels)
    assert "bad.bin" in str(info.value)
    assert not (tmp_path / "bad.bin").exists()


def test_the_writer_refuses_images_of_another_shape_or_type(tmp_path):
    with pytest.raises(CifarFormatError, match=r"uint8 of shape \(N, 3, 32, 32\)"):
        write_cifar10_batch(tmp_path / "bad.bin", np.zeros((2, 3, 32, 32), np.float32), np.array([0, 1]))
    with pytest.raises(CifarFormatError, match=r"uint8 of shape \(N, 3, 32, 32\)"):
        write_cifar10_batch(tmp_path / "bad.bin", np.zeros((2, 32, 32, 3), np.uint8), np.array([0, 1]))


def test_nothing_in_the_package_unpickles():
    # A pickle is code: the course reads CIFAR-10's binary records instead, and checkpoints with weights_only=True.
    for path in sorted(HELPERS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                assert not any(a.name in ("pickle", "_pickle", "dill", "cloudpickle") for a in node.names), path
            elif isinstance(node, ast.ImportFrom):
                assert node.module not in ("pickle", "_pickle", "dill", "cloudpickle"), path
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "load":
                if getattr(node.func.value, "id", None) in ("torch", "np", "numpy"):
                    keywords = {k.arg: k.value for k in node.keywords}
                    name = node.func.value.id
                    flag = "weights_only" if name == "torch" else "allow_pickle"
                    assert flag in keywords, f"{path}: {name}.load without {flag}="
                    assert getattr(keywords[flag], "value", None) is (name == "torch"), f"{path}: {name}.load unsafe"


@pytest.mark.timeout(60)
def test_a_fifo_or_a_link_to_a_device_for_a_batch_is_named_not_read(tmp_path):
    folder = write_folder(tmp_path / CIFAR10_FOLDER)
    (folder / "data_batch_3.bin").unlink()
    os.mkfifo(folder / "data_batch_3.bin")
    with pytest.raises(CifarFormatError, match=r"data_batch_3.bin: not a regular file \(a FIFO"):
        load_cifar10(tmp_path)
    (folder / "test_batch.bin").unlink()
    (folder / "test_batch.bin").symlink_to("/dev/zero")
    with pytest.raises(CifarFormatError, match=r"test_batch.bin: not a regular file"):
        load_cifar10(tmp_path, train=False)


IMAGES, LABELS = np.arange(2 * 3072, dtype=np.uint32).astype(np.uint8).reshape(2, 3, 32, 32), np.array([3, 7])


class TestRacesLinksAndFifos:
    """The CIFAR-10 reader opens each file once, non-blocking, and checks the descriptor (so a FIFO put there right
    after an existence check cannot block it, and /dev/zero is never read), and its writers go through a fresh scratch
    file and one rename: a link planted at the destination is replaced, never written through, a FIFO there never blocks
    them, and a reader sees the old file or the new one, never half."""

    def test_a_fifo_swapped_in_after_an_existence_check_cannot_block_the_read(self, tmp_path, monkeypatch):
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
    def test_a_link_to_a_device_as_the_class_names_is_named_not_read(self, tmp_path):
        os.symlink("/dev/zero", tmp_path / "batches.meta.txt")
        with pytest.raises(CifarFormatError, match="batches.meta.txt: not a regular file"):
            _within(20, lambda: cifar10_class_names(tmp_path))
        (tmp_path / "batches.meta.txt").unlink()
        (tmp_path / "batches.meta.txt").write_bytes(b"cat\n" * 100_000)
        with pytest.raises(CifarFormatError, match="batches.meta.txt: over 65536 bytes, not a file of class names"):
            cifar10_class_names(tmp_path)

    def test_the_writers_replace_a_planted_link_and_never_write_through_it(self, tmp_path):
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
    def test_a_fifo_at_the_destination_never_blocks_a_writer(self, tmp_path):
        os.mkfifo(tmp_path / "data_batch_1.bin")
        _within(20, lambda: write_cifar10_batch(tmp_path / "data_batch_1.bin", IMAGES, LABELS))
        assert read_cifar10_batch(tmp_path / "data_batch_1.bin")[1].tolist() == [3, 7]
        (tmp_path / "test_batch.bin").mkdir()
        with pytest.raises(CifarFormatError, match="test_batch.bin: is a folder, where the file goes"):
            write_cifar10_batch(tmp_path / "test_batch.bin", IMAGES, LABELS)


class TestClassNameCount:
    """A class-name file with too many names is refused."""

    def test_a_class_name_file_with_eleven_names_is_refused(self, tmp_path):
        (tmp_path / "batches.meta.txt").write_text("\n".join(f"c{i}" for i in range(11)) + "\n", encoding="ascii")
        with pytest.raises(CifarFormatError, match="11 class names, expected 10"):
            cifar10_class_names(tmp_path)
