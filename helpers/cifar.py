"""Reading CIFAR-10 as its authors distribute it: uint8 images (N, 3, 32, 32) and int64 labels, and its class names.

Copy alone: needs only numpy and torch.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch

CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST_BATCHES = ("test_batch",)


class CifarFormatError(RuntimeError):
    """A CIFAR-10 folder does not hold what the format promises (missing batches, wrong sizes, bad labels)."""


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle asked for something other than builtin containers, bytes and NumPy arrays."""


# Globals a CIFAR-10 batch may name: NumPy's array rebuilders and `_codecs.encode` (how protocol-2 pickles store
# bytes). Anything else (os.system, builtins.eval, ...) would be code execution, so it is refused.
_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "bytearray"),
}


class RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler that loads only builtin containers, bytes and NumPy arrays (a pickle is code otherwise)."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102 (documented by the class)
        if (module, name) not in _ALLOWED_GLOBALS:
            raise UnsafePickleError(f"refusing to load {module}.{name}: only containers, bytes and arrays may load")
        if module == "numpy.core.multiarray" and hasattr(np, "_core"):
            module = "numpy._core.multiarray"  # NumPy 2 moved it; the old name warns
        return super().find_class(module, name)


def restricted_load(path: str | os.PathLike) -> object:
    """Unpickle the file at `path` with RestrictedUnpickler (latin1 for Python 2 strings), naming the file on refusal."""
    path = Path(path)
    data = path.read_bytes()
    try:
        return RestrictedUnpickler(io.BytesIO(data), encoding="latin1").load()
    except UnsafePickleError as error:
        raise UnsafePickleError(f"{path}: {error}") from error
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as error:
        raise CifarFormatError(f"{path}: not a readable pickle ({type(error).__name__}: {error})") from error


def _str_keys(entry: dict) -> dict:
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in entry.items()}


def _cifar_folder(root: str | os.PathLike) -> Path:
    root = Path(root)
    return root if root.name == CIFAR10_FOLDER or (root / "batches.meta").exists() else root / CIFAR10_FOLDER


def load_cifar10(root: str | os.PathLike, train: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Read CIFAR-10 python batches under `root` as uint8 images (N, 3, 32, 32) and int64 labels (N,)."""
    folder = _cifar_folder(root)
    images, labels = [], []
    for name in CIFAR10_TRAIN_BATCHES if train else CIFAR10_TEST_BATCHES:
        path = folder / name
        if not path.is_file():
            raise CifarFormatError(f"{path}: missing CIFAR-10 batch; download and extract CIFAR-10 there first")
        entry = restricted_load(path)
        if not isinstance(entry, dict):
            raise CifarFormatError(f"{path}: expected a dict of 'data' and 'labels', found {type(entry).__name__}")
        entry = _str_keys(entry)
        data, batch_labels = entry.get("data"), entry.get("labels")
        if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
            got = f"{data.dtype} {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
            raise CifarFormatError(f"{path}: 'data' must be a uint8 array of shape (N, 3072), found {got}")
        batch_labels = np.asarray(batch_labels, dtype=np.int64)
        if batch_labels.shape != (len(data),) or batch_labels.min() < 0 or batch_labels.max() > 9:
            raise CifarFormatError(f"{path}: 'labels' must be {len(data)} integers in 0..9")
        images.append(data.reshape(-1, 3, 32, 32))
        labels.append(batch_labels)
    return torch.from_numpy(np.concatenate(images)), torch.from_numpy(np.concatenate(labels))


def cifar10_class_names(root: str | os.PathLike) -> list[str]:
    """Return the class names from `batches.meta` under `root`."""
    path = _cifar_folder(root) / "batches.meta"
    meta = _str_keys(restricted_load(path))
    names = meta.get("label_names")
    if not isinstance(names, list) or len(names) != 10:
        raise CifarFormatError(f"{path}: 'label_names' must be a list of 10 names")
    return [n.decode() if isinstance(n, bytes) else str(n) for n in names]
