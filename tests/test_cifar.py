"""CIFAR-10 loading: a restricted unpickler that refuses code, and arrays equal to a direct parse of the bytes."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch

from helpers.cifar import CifarFormatError as DatasetLayoutError
from helpers.cifar import UnsafePickleError, load_cifar10, restricted_load


def cifar_batch_bytes(count: int, seed: int = 0, label_offset: int = 0) -> bytes:
    """A CIFAR-10 python batch of `count` random images, pickled as the original (protocol 2)."""
    rng = np.random.default_rng(seed)
    entry = {
        "batch_label": f"batch {seed}",
        "labels": [int((i + label_offset) % 10) for i in range(count)],
        "data": rng.integers(0, 256, (count, 3072), dtype=np.uint8),
        "filenames": [f"img_{i}.png" for i in range(count)],
    }
    return pickle.dumps(entry, protocol=2)


def _write_batches(folder, counts: dict[str, int]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for offset, (name, count) in enumerate(counts.items()):
        (folder / name).write_bytes(cifar_batch_bytes(count, seed=offset, label_offset=offset))


class RunsCode:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_a_pickle_that_would_run_code_is_refused(tmp_path):
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({"data": RunsCode()}, protocol=2))
    with pytest.raises(UnsafePickleError, match="system") as info:
        restricted_load(path)
    assert str(path) in str(info.value)


def test_builtins_eval_is_refused_too(tmp_path):
    path = tmp_path / "evil"
    path.write_bytes(b"cbuiltins\neval\n(S'1+1'\ntR.")
    with pytest.raises(UnsafePickleError, match="builtins.eval"):
        restricted_load(path)


def test_load_cifar10_matches_a_direct_parse_of_the_same_bytes(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    _write_batches(folder, {f"data_batch_{i}": 7 + i for i in range(1, 6)} | {"test_batch": 5})
    images, labels = load_cifar10(tmp_path, train=True)
    expected_images, expected_labels = [], []
    for i in range(1, 6):
        # Trusted bytes we wrote ourselves: a plain unpickler is the independent reference here.
        entry = pickle.loads((folder / f"data_batch_{i}").read_bytes())
        data = entry["data"]
        expected_images.append(np.stack([data[:, c * 1024 : (c + 1) * 1024].reshape(-1, 32, 32) for c in range(3)], 1))
        expected_labels.extend(entry["labels"])
    assert images.dtype == torch.uint8 and images.shape == (sum(7 + i for i in range(1, 6)), 3, 32, 32)
    assert labels.dtype == torch.int64
    assert np.array_equal(images.numpy(), np.concatenate(expected_images))
    assert labels.tolist() == expected_labels
    test_images, test_labels = load_cifar10(folder, train=False)  # the batches folder itself works too
    assert test_images.shape == (5, 3, 32, 32) and len(test_labels) == 5


def test_a_wrongly_shaped_batch_is_named(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    _write_batches(folder, {f"data_batch_{i}": 3 for i in range(1, 6)})
    entry = {"data": np.zeros((3, 100), np.uint8), "labels": [0, 1, 2]}
    (folder / "data_batch_3").write_bytes(pickle.dumps(entry, protocol=2))
    with pytest.raises(DatasetLayoutError, match=r"data_batch_3.*\(N, 3072\)"):
        load_cifar10(tmp_path)


def test_a_missing_batch_is_named(tmp_path):
    _write_batches(tmp_path / "cifar-10-batches-py", {"data_batch_1": 3})
    with pytest.raises(DatasetLayoutError, match="data_batch_2"):
        load_cifar10(tmp_path)
