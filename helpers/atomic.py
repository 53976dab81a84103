"""Writing shared files safely: an inter-process lock beside a target, and publishing a file or folder in one rename.

Every writer of shared data (downloads, extraction, caches, checkpoints) builds in a private staging place and
publishes with one atomic `os.replace`, so a reader (another rank, another notebook, a later run) sees either the
old complete version or the new complete one, never half of either.

Copy alone: needs only the standard library (POSIX `fcntl` for the lock; elsewhere the lock is a no-op).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no fcntl; staging + rename still keep readers safe, only concurrent builds repeat work
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def file_lock(target: str | os.PathLike) -> Iterator[Path]:
    """Hold an exclusive inter-process lock on `target.lock` (beside `target`) for the duration of the block.

    The lock is released by the kernel when the holder exits or is killed, so a crashed writer never blocks others.
    """
    lock_path = Path(target).with_name(Path(target).name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield lock_path
        finally:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def staging_path(target: str | os.PathLike) -> Path:
    """A private, unique sibling path of `target` to build into (same file system, so the final rename is atomic)."""
    target = Path(target)
    return target.with_name(f".{target.name}.staging-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def publish(staging: str | os.PathLike, target: str | os.PathLike) -> Path:
    """Move a complete file or folder from `staging` to `target` in one rename, replacing what was there.

    A folder cannot be renamed over a non-empty folder, so an existing one is first renamed aside (still whole)
    and removed after the new one is in place.
    """
    staging, target = Path(staging), Path(target)
    if target.is_dir() and not target.is_symlink():
        aside = target.with_name(f".{target.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        os.replace(target, aside)
        os.replace(staging, target)
        _remove(aside)
    else:
        os.replace(staging, target)
    return target


@contextlib.contextmanager
def staged(target: str | os.PathLike, *, folder: bool = False) -> Iterator[Path]:
    """Yield a private staging path for `target`; publish it when the block ends without error, else remove it.

    With `folder=True` the staging folder is created for you.
    """
    path = staging_path(target)
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    if folder:
        path.mkdir()
    try:
        yield path
    except BaseException:
        _remove(path)
        raise
    publish(path, target)


def write_text_atomically(target: str | os.PathLike, text: str) -> Path:
    """Write `text` to `target` through a staging file and one rename."""
    with staged(target) as path:
        path.write_text(text, encoding="utf-8")
    return Path(target)
