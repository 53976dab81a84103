"""The course's data: where it lives, BSDS300 and CIFAR-10 downloads (or offline stand-ins), and safe CIFAR loading."""

from __future__ import annotations

import io
import os
import pickle
import shutil
import urllib.error
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .download import ChecksumMismatchError, IncompleteDownloadError, download, extract_into
from .standins import standin_is_current, write_cifar10_standin, write_sr_standin

DATA_DIR_ENV_VAR = "COURSE_DATA_DIR"
OFFLINE_ENV_VAR = "COURSE_OFFLINE"

BSDS300_URL = "https://www2.eecs.berkeley.edu/Research/Projects/CS/vision/bsds/BSDS300-images.tgz"
# The only public pin we found, from one third-party script: a mismatch stops with instructions, never passes.
BSDS300_SHA256 = "a5f7d0e49fe135c75518a3543ced24470156fd69305ae77845dff2a5138652b4"
BSDS300_SHA256_ENV_VAR = "COURSE_BSDS300_SHA256"
BSDS300_COUNTS = {"train": 200, "test": 100}  # BSD100 is BSDS300's 100 test images

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST_BATCHES = ("test_batch",)

STANDIN_FOLDER = "standin"


class DatasetLayoutError(RuntimeError):
    """A dataset folder does not hold what its format promises (missing folders, wrong counts, bad arrays)."""


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle asked for something other than builtin containers, bytes and NumPy arrays."""


@dataclass(frozen=True)
class DataSource:
    """Where a dataset came from: `root` is the folder the loaders read; `is_standin` marks offline stand-ins."""

    name: str
    root: Path
    is_standin: bool
    note: str

    def describe(self) -> str:
        """One line saying which data this is and how it was obtained."""
        kind = "OFFLINE STAND-IN, not the real dataset" if self.is_standin else "the real dataset"
        return f"{self.name} ({kind}) at {self.root}: {self.note}"


def data_root() -> Path:
    """Return the data folder: COURSE_DATA_DIR, else `data/` in the repository."""
    configured = os.environ.get(DATA_DIR_ENV_VAR, "").strip()
    root = Path(configured).expanduser() if configured else Path(__file__).resolve().parents[1] / "data"
    root.mkdir(parents=True, exist_ok=True)
    return root


def offline_requested() -> bool:
    """True when COURSE_OFFLINE asks for the offline stand-ins."""
    return os.environ.get(OFFLINE_ENV_VAR, "").strip().lower() in {"1", "true", "yes", "on"}


def _network_failure(error: Exception) -> bool:
    """True for failures that mean 'no network' (fall back to the stand-in), not 'wrong data' (stop)."""
    return isinstance(error, (urllib.error.URLError, IncompleteDownloadError, TimeoutError, ConnectionError))


# --- BSDS300 -----------------------------------------------------------------------------------------------------


def bsds300_split(root: str | os.PathLike, split: str = "train") -> list[Path]:
    """Return the sorted JPEG paths of a BSDS300-layout folder's `train` or `test` split (test = BSD100)."""
    folder = Path(root) / "images" / split
    if split not in BSDS300_COUNTS:
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    if not folder.is_dir():
        raise DatasetLayoutError(f"{folder}: missing; expected the BSDS300 layout images/train and images/test")
    return sorted(folder.glob("*.jpg"))


def check_bsds300_layout(root: str | os.PathLike, counts: dict[str, int] | None = None) -> dict[str, int]:
    """Check a BSDS300-layout folder: both splits present, with `counts` images each when given; return the counts."""
    found = {split: len(bsds300_split(root, split)) for split in BSDS300_COUNTS}
    for split, want in (counts or {}).items():
        if found[split] != want:
            raise DatasetLayoutError(
                f"{Path(root) / 'images' / split}: {found[split]} images, expected {want}; the archive is incomplete "
                "or was changed: delete the folder and run again"
            )
    for split, count in found.items():
        if count == 0:
            raise DatasetLayoutError(f"{Path(root) / 'images' / split}: no .jpg images")
    return found


def _standin(name: str, folder: Path, writer, reason: str) -> DataSource:
    if not standin_is_current(folder):
        writer(folder)
    return DataSource(
        name=f"{name} stand-in (scikit-image photographs)",
        root=folder,
        is_standin=True,
        note=f"{reason}; using real photographs from scikit-image in the {name} format instead",
    )


def prepare_bsds300(
    root: str | os.PathLike | None = None,
    offline: bool | None = None,
    url: str = BSDS300_URL,
    sha256: str | None = None,
    progress: bool = True,
) -> DataSource:
    """Make BSDS300 ready (verified download, safe extraction, 200/100 split checked), or the stand-in when offline."""
    root = Path(root) if root is not None else data_root()
    real = root / "BSDS300"
    sha256 = sha256 or os.environ.get(BSDS300_SHA256_ENV_VAR) or BSDS300_SHA256
    offline = offline_requested() if offline is None else offline
    standin = root / STANDIN_FOLDER / "BSDS300"
    if real.is_dir():
        check_bsds300_layout(real, BSDS300_COUNTS)
        return DataSource("BSDS300", real, False, f"already prepared at {real}")
    if offline:
        return _standin("BSDS300", standin, write_sr_standin, f"{OFFLINE_ENV_VAR}=1")
    try:
        archive = download(url, root / "BSDS300-images.tgz", sha256=sha256, progress=progress)
    except ChecksumMismatchError as error:
        raise ChecksumMismatchError(
            f"{error} To accept a new BSDS300 archive, set {BSDS300_SHA256_ENV_VAR} to its SHA-256. "
            f"To work offline meanwhile, set {OFFLINE_ENV_VAR}=1."
        ) from error
    except Exception as error:  # noqa: BLE001 (only network failures fall back; the rest re-raise)
        if not _network_failure(error):
            raise
        return _standin("BSDS300", standin, write_sr_standin, f"download of {url} failed ({error})")
    extract_into(archive, root, "BSDS300")
    check_bsds300_layout(real, BSDS300_COUNTS)
    return DataSource("BSDS300", real, False, f"downloaded from {url}, SHA-256 verified, 200/100 split checked")


# --- CIFAR-10 ----------------------------------------------------------------------------------------------------

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
        raise DatasetLayoutError(f"{path}: not a readable pickle ({type(error).__name__}: {error})") from error


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
            raise DatasetLayoutError(f"{path}: missing CIFAR-10 batch; prepare the data with prepare_cifar10()")
        entry = restricted_load(path)
        if not isinstance(entry, dict):
            raise DatasetLayoutError(f"{path}: expected a dict of 'data' and 'labels', found {type(entry).__name__}")
        entry = _str_keys(entry)
        data, batch_labels = entry.get("data"), entry.get("labels")
        if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
            got = f"{data.dtype} {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
            raise DatasetLayoutError(f"{path}: 'data' must be a uint8 array of shape (N, 3072), found {got}")
        batch_labels = np.asarray(batch_labels, dtype=np.int64)
        if batch_labels.shape != (len(data),) or batch_labels.min() < 0 or batch_labels.max() > 9:
            raise DatasetLayoutError(f"{path}: 'labels' must be {len(data)} integers in 0..9")
        images.append(data.reshape(-1, 3, 32, 32))
        labels.append(batch_labels)
    return torch.from_numpy(np.concatenate(images)), torch.from_numpy(np.concatenate(labels))


def cifar10_class_names(root: str | os.PathLike) -> list[str]:
    """Return the class names from `batches.meta` under `root`."""
    path = _cifar_folder(root) / "batches.meta"
    meta = _str_keys(restricted_load(path))
    names = meta.get("label_names")
    if not isinstance(names, list) or len(names) != 10:
        raise DatasetLayoutError(f"{path}: 'label_names' must be a list of 10 names")
    return [n.decode() if isinstance(n, bytes) else str(n) for n in names]


def _cifar10_complete(folder: Path) -> bool:
    names = (*CIFAR10_TRAIN_BATCHES, *CIFAR10_TEST_BATCHES, "batches.meta")
    return all((folder / name).is_file() for name in names)


def prepare_cifar10(
    root: str | os.PathLike | None = None,
    offline: bool | None = None,
    url: str = CIFAR10_URL,
    md5: str = CIFAR10_MD5,
    progress: bool = True,
) -> DataSource:
    """Make CIFAR-10 ready (md5-verified download, safe extraction), or the stand-in when offline."""
    root = Path(root) if root is not None else data_root()
    offline = offline_requested() if offline is None else offline
    standin = root / STANDIN_FOLDER / CIFAR10_FOLDER
    if _cifar10_complete(root / CIFAR10_FOLDER):
        return DataSource("CIFAR-10", root / CIFAR10_FOLDER, False, f"already prepared at {root / CIFAR10_FOLDER}")
    if offline:
        return _standin("CIFAR-10", standin, write_cifar10_standin, f"{OFFLINE_ENV_VAR}=1")
    try:
        archive = download(url, root / "cifar-10-python.tar.gz", md5=md5, progress=progress)
    except Exception as error:  # noqa: BLE001 (only network failures fall back; the rest re-raise)
        if not _network_failure(error):
            raise
        return _standin("CIFAR-10", standin, write_cifar10_standin, f"download of {url} failed ({error})")
    folder = extract_into(archive, root, CIFAR10_FOLDER)
    if not _cifar10_complete(folder):
        raise DatasetLayoutError(f"{folder}: the archive did not hold all CIFAR-10 batches; delete it and run again")
    return DataSource("CIFAR-10", folder, False, f"downloaded from {url}, MD5 verified")


def export_image_folder(
    images: torch.Tensor, labels: torch.Tensor, class_names: list[str], dest: str | os.PathLike
) -> Path:
    """Write uint8 (N, 3, H, W) images as PNGs in torchvision's ImageFolder layout (dest/<class>/<index>.png).

    Reuses `dest` when it already holds exactly these N files; writes atomically otherwise.
    """
    from PIL import Image

    dest = Path(dest)
    marker = dest / f".complete-{len(images)}"
    if marker.is_file():
        return dest
    staging = dest.with_name(f".{dest.name}.writing")
    shutil.rmtree(staging, ignore_errors=True)
    for name in class_names:
        (staging / name).mkdir(parents=True)
    array = images.permute(0, 2, 3, 1).numpy()
    for index, (pixels, label) in enumerate(zip(array, labels.tolist())):
        Image.fromarray(pixels).save(staging / class_names[label] / f"{index:06d}.png", compress_level=1)
    (staging / marker.name).touch()
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(staging, dest)
    return dest
