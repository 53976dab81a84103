"""The course's data: where it lives (COURSE_DATA_DIR), BSDS300 and CIFAR-10 verified downloads, or the offline
stand-ins (COURSE_OFFLINE), and the BSDS300 layout."""

from __future__ import annotations

import os
import textwrap
import time
import urllib.error
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..cifar import (
    CIFAR10_FOLDER,
    CIFAR10_META,
    CIFAR10_TEST_BATCHES,
    CIFAR10_TRAIN_BATCHES,
    RECORD_BYTES,
    check_cifar10_folder,
)
from ..download import ChecksumMismatchError, ExtractLimits, IncompleteDownloadError, download, extract_into
from ..safe_open import make_dirs
from .standins import standin_is_current, write_cifar10_standin, write_sr_standin

DATA_DIR_ENV_VAR = "COURSE_DATA_DIR"
OFFLINE_ENV_VAR = "COURSE_OFFLINE"

BSDS300_URL = "https://www2.eecs.berkeley.edu/Research/Projects/CS/vision/bsds/BSDS300-images.tgz"
# The only public pin we found, from one third-party script: a mismatch stops with instructions, never passes.
BSDS300_SHA256 = "a5f7d0e49fe135c75518a3543ced24470156fd69305ae77845dff2a5138652b4"
BSDS300_SHA256_ENV_VAR = "COURSE_BSDS300_SHA256"
BSDS300_COUNTS = {"train": 200, "test": 100}  # BSD100 is BSDS300's 100 test images
# The archive holds 300 JPEGs of ~70 KB (22 MB in all), two id lists and their folders: far past that, it is not it.
BSDS300_LIMITS = ExtractLimits(members=400, member_bytes=4 << 20, total_bytes=64 << 20)
# Its exact byte count is published nowhere we could check, so the download gets a cap (and a deadline from it):
# a transfer heading past 32 MiB is not this 22 MB archive.
BSDS300_MAX_BYTES = 32 << 20

# The authors' binary version (170,052,171 bytes): fixed 3,073-byte records, read without unpickling anything.
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
CIFAR10_MD5 = "c32a1d4ab5d03f1284b67883e8d87530"
CIFAR10_BYTES = 170_052_171  # a transfer that is heading past it is not this file: abandoned at once
# Six batch files of 30,730,000 bytes, the class names and a readme: 185 MB in 9 members.
CIFAR10_LIMITS = ExtractLimits(members=16, member_bytes=32 << 20, total_bytes=192 << 20)

STANDIN_FOLDER = "standin"


class DatasetLayoutError(RuntimeError):
    """A dataset folder does not hold what its format promises (missing folders, wrong counts, bad arrays)."""


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


def repository_root() -> Path | None:
    """The course checkout this package runs from (the folder holding `notebooks/` and `helpers/`), if it is one."""
    candidate = Path(__file__).resolve().parents[2]
    return candidate if (candidate / "notebooks").is_dir() and (candidate / "helpers").is_dir() else None


def data_root() -> Path:
    """Return the data folder: COURSE_DATA_DIR, else `data/` in the course checkout, else ~/.cache/feeding-the-gpu."""
    configured = os.environ.get(DATA_DIR_ENV_VAR, "").strip()
    if configured:
        root = Path(configured).expanduser()
    else:
        checkout = repository_root()
        root = checkout / "data" if checkout is not None else Path.home() / ".cache" / "feeding-the-gpu" / "data"
    try:
        return make_dirs(root)
    except OSError as error:
        where = f"{DATA_DIR_ENV_VAR}={configured}" if configured else "the default data folder"
        raise NotADirectoryError(
            error.errno,
            f"{where}: cannot use {root} as the data folder ({error.strerror or error}); set "
            f"{DATA_DIR_ENV_VAR} to a folder (it is created if missing)",
            str(root),
        ) from error


def offline_requested() -> bool:
    """True when COURSE_OFFLINE asks for the offline stand-ins."""
    return os.environ.get(OFFLINE_ENV_VAR, "").strip().lower() in {"1", "true", "yes", "on"}


def _network_failure(error: Exception) -> bool:
    """True for failures that mean 'no network' (fall back to the stand-in), not 'wrong data' (stop)."""
    return isinstance(error, (urllib.error.URLError, IncompleteDownloadError, TimeoutError, ConnectionError))


UNREACHABLE_S = (
    3600  # after a failed download, later notebooks say so in one line instead of trying again for this long
)


def _brief(error: Exception) -> str:
    """The failure in a few words: a URLError's reason without its wrapping, other errors' first line."""
    reason = getattr(error, "reason", None)
    text = str(reason.strerror if isinstance(reason, OSError) and reason.strerror else reason or error)
    return textwrap.shorten(text.splitlines()[0], 120, placeholder=" …") if text else type(error).__name__


def _unreachable_marker(standin: Path) -> Path:
    return standin.parent / f"{standin.name}.unreachable"


def _recent_failure(standin: Path, url: str) -> str | None:
    """The note an earlier failed download of `url` left, if it is recent: later notebooks repeat it briefly."""
    marker = _unreachable_marker(standin)
    try:
        age = time.time() - marker.stat().st_mtime
        tried, _, text = marker.read_text(encoding="utf-8").strip().partition("\n")
    except OSError:
        return None
    if tried != url or age >= UNREACHABLE_S:
        return None
    return f"{text}, {age / 60:.0f} min ago; not retried for an hour (delete {marker} to retry now)"


def _fell_back(url: str, standin: Path, error: Exception) -> str:
    """Remember a failed download for the notebooks that follow, and say it in one short line."""
    text = f"the download from {urllib.parse.urlsplit(url).netloc} failed ({_brief(error)})"
    try:
        make_dirs(standin.parent)
        _unreachable_marker(standin).write_text(f"{url}\n{text}\n", encoding="utf-8")
    except OSError:
        pass  # the note is a courtesy: without it the next notebook simply tries again
    return text


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


def _bsds300_complete(folder: Path) -> bool:
    try:
        check_bsds300_layout(folder, BSDS300_COUNTS)
    except DatasetLayoutError:
        return False
    return True


def _checked_extraction(archive: Path, check: Callable[[Path], object]) -> Callable[[Path], None]:
    """`check` for a folder just extracted from `archive`, its failure reported as a problem of the archive."""

    def verify(folder: Path) -> None:
        try:
            check(folder)
        except Exception as error:  # noqa: BLE001 (the layout checks raise their own clear types)
            raise DatasetLayoutError(
                f"{archive}: the archive does not hold the expected dataset ({error}); it was not extracted. "
                f"Delete {archive} and run again"
            ) from error

    return verify


def _mismatch_advice(error: ChecksumMismatchError, new_digest: str) -> str:
    """What to add to a checksum mismatch: how to accept a new archive, unless the file is not an archive at all."""
    if getattr(error, "kind_found", "gzip") != "gzip":
        return f"To work offline meanwhile, set {OFFLINE_ENV_VAR}=1."
    return (
        f"Only if you have checked where a new archive came from, accept it with {new_digest}. "
        f"To work offline meanwhile, set {OFFLINE_ENV_VAR}=1."
    )


def _standin(name: str, folder: Path, writer: Callable[[Path], Path], reason: str) -> DataSource:
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
    *,
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
    if _bsds300_complete(real):
        return DataSource("BSDS300", real, False, f"already prepared at {real}")
    if offline:
        return _standin("BSDS300", standin, write_sr_standin, f"{OFFLINE_ENV_VAR}=1")
    if (earlier := _recent_failure(standin, url)) is not None:
        return _standin("BSDS300", standin, write_sr_standin, earlier)
    try:
        archive = download(
            url, root / "BSDS300-images.tgz", sha256=sha256, kind="gzip", max_bytes=BSDS300_MAX_BYTES, progress=progress
        )
    except ChecksumMismatchError as error:
        advice = _mismatch_advice(error, f"{BSDS300_SHA256_ENV_VAR}=<its SHA-256>")
        raise ChecksumMismatchError(f"{error} {advice}") from error
    except Exception as error:  # noqa: BLE001 (only network failures fall back; the rest re-raise)
        if not _network_failure(error):
            raise
        return _standin("BSDS300", standin, write_sr_standin, _fell_back(url, standin, error))
    verify = _checked_extraction(archive, lambda folder: check_bsds300_layout(folder, BSDS300_COUNTS))
    extract_into(archive, root, "BSDS300", verify=verify, limits=BSDS300_LIMITS)  # one process extracts, once
    return DataSource("BSDS300", real, False, f"downloaded from {url}, SHA-256 verified, 200/100 split checked")


# --- CIFAR-10 ----------------------------------------------------------------------------------------------------


def _cifar10_complete(folder: Path) -> bool:
    """Every batch present as a whole number of records, and the class names (contents are checked on loading)."""
    batches = [folder / name for name in (*CIFAR10_TRAIN_BATCHES, *CIFAR10_TEST_BATCHES)]
    sizes = [path.stat().st_size if path.is_file() else 0 for path in batches]
    return all(size and size % RECORD_BYTES == 0 for size in sizes) and (folder / CIFAR10_META).is_file()


def prepare_cifar10(
    root: str | os.PathLike | None = None,
    *,
    offline: bool | None = None,
    url: str = CIFAR10_URL,
    md5: str = CIFAR10_MD5,
    progress: bool = True,
) -> DataSource:
    """Make CIFAR-10 ready (the binary version: MD5-verified download, safe extraction, every record checked), or
    the stand-in in the same format when offline."""
    root = Path(root) if root is not None else data_root()
    offline = offline_requested() if offline is None else offline
    standin = root / STANDIN_FOLDER / CIFAR10_FOLDER
    if _cifar10_complete(root / CIFAR10_FOLDER):
        return DataSource("CIFAR-10", root / CIFAR10_FOLDER, False, f"already prepared at {root / CIFAR10_FOLDER}")
    if offline:
        return _standin("CIFAR-10", standin, write_cifar10_standin, f"{OFFLINE_ENV_VAR}=1")
    if (earlier := _recent_failure(standin, url)) is not None:
        return _standin("CIFAR-10", standin, write_cifar10_standin, earlier)
    try:
        size = CIFAR10_BYTES if url == CIFAR10_URL else None
        archive = download(url, root / "cifar-10-binary.tar.gz", md5=md5, kind="gzip", size=size, progress=progress)
    except ChecksumMismatchError as error:
        raise ChecksumMismatchError(f"{error} {_mismatch_advice(error, 'prepare_cifar10(md5=...)')}") from error
    except Exception as error:  # noqa: BLE001 (only network failures fall back; the rest re-raise)
        if not _network_failure(error):
            raise
        return _standin("CIFAR-10", standin, write_cifar10_standin, _fell_back(url, standin, error))
    verify = _checked_extraction(archive, check_cifar10_folder)
    folder = extract_into(archive, root, CIFAR10_FOLDER, verify=verify, limits=CIFAR10_LIMITS)
    return DataSource("CIFAR-10", folder, False, f"downloaded from {url} (binary version), MD5 verified")
