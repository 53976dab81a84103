"""CIFAR-10 in its authors' binary format: uint8 images (N, 3, 32, 32), int64 labels, and its class names.

The binary version (`cifar-10-binary.tar.gz`) is fixed 3,073-byte records, 1 label byte then 1,024 red, 1,024 green
and 1,024 blue bytes, row-major, read here with `numpy.frombuffer`. Nothing is unpickled: the python version of the
dataset is a pickle, and a pickle can run code, even through a restricted unpickler limited to NumPy's own types.

Example:
    >>> import tempfile
    >>> images, labels = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8), torch.tensor([0, 1, 2, 9])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     read = read_cifar10_batch(write_cifar10_batch(Path(tmp) / "test_batch.bin", images, labels))
    >>> torch.equal(read[0], images), read[1].tolist()
    (True, [0, 1, 2, 9])

Copy alone.
Needs: numpy, torch.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from pathlib import Path

import numpy as np
import torch

CIFAR10_FOLDER = "cifar-10-batches-bin"
CIFAR10_TRAIN_BATCHES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
CIFAR10_TEST_BATCHES = ("test_batch.bin",)
CIFAR10_META = "batches.meta.txt"
CIFAR10_CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)
RECORD_BYTES = 1 + 3 * 32 * 32  # one label byte, then the pixels
META_BYTES = 64 << 10  # ten class names, one a line: past this it is not the class-name file


class CifarFormatError(RuntimeError):
    """A CIFAR-10 folder does not hold what the format promises (missing batches, wrong sizes, bad labels)."""


def _cifar_folder(root: str | os.PathLike) -> Path:
    root = Path(root)
    return root if root.name == CIFAR10_FOLDER or (root / CIFAR10_META).exists() else root / CIFAR10_FOLDER


def _open_file(path: Path, what: str):
    """`path` open for reading when it is a regular file (a link to one is fine), else CifarFormatError saying what is
    there; non-blocking and checked with fstat, so a FIFO or device is never read and nothing can be swapped in
    between a check and the read (safe_open.py's check, written out so this module copies alone)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return os.fdopen(fd, "rb")
        os.close(fd)
    except OSError as error:  # missing, a dangling link, a socket (ENXIO), unreadable
        if not os.path.lexists(path):
            raise CifarFormatError(f"{path}: missing {what}; prepare CIFAR-10 (binary version) there first") from None
        if error.errno not in (errno.ENOENT, errno.ENXIO):
            raise CifarFormatError(f"{path}: cannot read the {what} ({error.strerror})") from error
    raise CifarFormatError(
        f"{path}: not a regular file (a FIFO, folder, device or dangling link) where it expects the {what}; prepare "
        "CIFAR-10 (binary version) there first"
    )


def read_cifar10_batch(path: str | os.PathLike) -> tuple[torch.Tensor, torch.Tensor]:
    """Read one binary batch file as uint8 images (N, 3, 32, 32) and int64 labels (N,), checking size and labels."""
    path = Path(path)
    with _open_file(path, "CIFAR-10 batch") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0 or size % RECORD_BYTES:
            raise CifarFormatError(
                f"{path}: {size} bytes is not a whole number of {RECORD_BYTES}-byte CIFAR-10 records; the file is "
                "truncated or not the binary version: delete the folder and prepare CIFAR-10 again"
            )
        data = f.read(size)
    if len(data) != size:
        raise CifarFormatError(f"{path}: changed while it was read ({len(data)} of {size} bytes); read it again")
    records = np.frombuffer(data, dtype=np.uint8).reshape(-1, RECORD_BYTES)
    labels = records[:, 0]
    bad = np.flatnonzero(labels >= CIFAR10_CLASSES)
    if len(bad):
        raise CifarFormatError(
            f"{path}: record {int(bad[0])} has label {int(labels[bad[0]])}, outside 0..9 ({len(bad)} such records); "
            "the file is damaged or not CIFAR-10: delete the folder and prepare CIFAR-10 again"
        )
    images = np.ascontiguousarray(records[:, 1:]).reshape(-1, *IMAGE_SHAPE)  # a writable copy
    return torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64))


def load_cifar10(root: str | os.PathLike, train: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Read the CIFAR-10 binary batches under `root` as uint8 images (N, 3, 32, 32) and int64 labels (N,)."""
    folder = _cifar_folder(root)
    batches = [read_cifar10_batch(folder / name) for name in (CIFAR10_TRAIN_BATCHES if train else CIFAR10_TEST_BATCHES)]
    return torch.cat([images for images, _ in batches]), torch.cat([labels for _, labels in batches])


def cifar10_class_names(root: str | os.PathLike) -> list[str]:
    """Return the 10 class names from `batches.meta.txt` under `root` (one per line)."""
    path = _cifar_folder(root) / CIFAR10_META
    with _open_file(path, "class-name file") as f:
        data = f.read(META_BYTES + 1)
    if len(data) > META_BYTES:
        raise CifarFormatError(f"{path}: over {META_BYTES} bytes, not a file of class names; prepare CIFAR-10 again")
    try:
        names = [line.strip() for line in data.decode("ascii").splitlines() if line.strip()]
    except UnicodeDecodeError as error:
        raise CifarFormatError(f"{path}: not a text file of class names ({error}); prepare CIFAR-10 again") from error
    if len(names) != CIFAR10_CLASSES:
        raise CifarFormatError(f"{path}: {len(names)} class names, expected 10 (one per line); prepare CIFAR-10 again")
    return names


def check_cifar10_folder(root: str | os.PathLike) -> dict[str, int]:
    """Read every batch and the class names under `root` (raising CifarFormatError); return the images per split."""
    counts = {"train": len(load_cifar10(root, train=True)[1]), "test": len(load_cifar10(root, train=False)[1])}
    cifar10_class_names(root)
    return counts


def _labels_as_bytes(labels: torch.Tensor | np.ndarray, count: int, path: Path) -> np.ndarray:
    labels = labels.numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if labels.shape != (count,) or labels.dtype.kind not in "iu":
        raise CifarFormatError(
            f"{path}: labels must be {count} integers (an integer array of shape ({count},)), got {labels.dtype} "
            f"{labels.shape}; convert float or string labels to class indices first"
        )
    if count and (labels.min() < 0 or labels.max() >= CIFAR10_CLASSES):
        raise CifarFormatError(f"{path}: labels must be in 0..9, got {labels.min()}..{labels.max()}")
    return labels.astype(np.uint8)


def _write_new(path: Path, data: bytes) -> Path:
    """Write `data` to `path` through a fresh scratch file beside it and one rename: never through a link or into a
    FIFO someone put at `path`, and a reader sees the old file or the new one, never half of it."""
    if os.path.isdir(path) and not os.path.islink(path):
        raise CifarFormatError(f"{path}: is a folder, where the file goes; move it away, or write somewhere else")
    scratch = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        with os.fdopen(os.open(scratch, flags, 0o644), "wb") as f:
            f.write(data)
        os.replace(scratch, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise
    return path


def write_cifar10_batch(
    path: str | os.PathLike, images: torch.Tensor | np.ndarray, labels: torch.Tensor | np.ndarray
) -> Path:
    """Write uint8 images (N, 3, 32, 32) and integer labels 0..9 as one CIFAR-10 binary batch file."""
    path = Path(path)
    images = images.numpy() if isinstance(images, torch.Tensor) else np.asarray(images)
    if images.dtype != np.uint8 or images.shape[1:] != IMAGE_SHAPE:
        got = f"{images.dtype} {images.shape}"
        raise CifarFormatError(f"{path}: images must be uint8 of shape (N, 3, 32, 32), got {got}")
    records = np.empty((len(images), RECORD_BYTES), dtype=np.uint8)
    records[:, 0] = _labels_as_bytes(labels, len(images), path)
    records[:, 1:] = images.reshape(len(images), -1)
    return _write_new(path, records.tobytes())


def write_cifar10_class_names(path: str | os.PathLike, names: list[str]) -> Path:
    """Write the 10 class names as `batches.meta.txt` does: one per line."""
    path = Path(path)
    if len(names) != CIFAR10_CLASSES or any(not n.strip() or "\n" in n for n in names):
        raise CifarFormatError(f"{path}: need 10 non-empty one-line class names, got {names!r}")
    return _write_new(path, ("\n".join(names) + "\n").encode("ascii"))
