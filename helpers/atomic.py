"""Writing shared files safely: an inter-process lock beside a target, and publishing a file or folder in one rename.

Every writer of shared data (downloads, extraction, caches, checkpoints) builds in a private staging place and
publishes with one atomic `os.replace`, so a reader (another rank, another notebook, a later run) sees either the
old complete version or the new complete one, never half of either. `build_once` adds the rest of the recipe for
data several processes may build at once: take the lock, look again (another process may have finished while this
one waited), clear what a killed builder left behind, build privately, publish only a complete build. A build
that cannot be written (a full disk, a read-only folder) is a `DestinationError` naming the target and what to do;
what was there before stays whole. The hidden names beside a target (lock, staging, set-aside) always fit in a file
name, however long the target's own name.

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with staged(Path(tmp) / "numbers.txt") as staging:  # a private sibling, renamed into place at the end
    ...         _ = staging.write_text("1 2 3")
    ...     print(os.listdir(tmp), (Path(tmp) / "numbers.txt").read_text())
    ['numbers.txt'] 1 2 3

Copy with: safe_open.py (locks and scratch files opened as regular files, never through a planted link).
Needs: the standard library only (POSIX `fcntl` for the lock; elsewhere the lock is a no-op).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import socket
import stat
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .safe_open import describe_mode, make_dirs, open_regular

try:
    import fcntl
except ImportError:  # Windows: no fcntl; staging + rename still keep readers safe, only concurrent builds repeat work
    fcntl = None  # type: ignore[assignment]

_ZEROS = bytes(1 << 20)
NAME_MAX = 255  # bytes in one file name (Linux, macOS, Windows)
_HIDDEN_NAME_BYTES = 140  # a target name longer than this is shortened (with a digest) inside hidden sibling names
_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}
_DESKTOP_FILES = {".DS_Store", "Thumbs.db", "desktop.ini"}  # what a file browser leaves in a folder it showed


class DestinationError(OSError):
    """Data cannot be written where it goes (a full disk, a read-only folder); names the place and what to do."""


def _destination_error(
    error: OSError, target: str | os.PathLike, what: str = "it", *, anywhere: bool = False
) -> OSError:
    """`error` as a DestinationError naming `target` when it is a full disk or a folder that cannot be written (a
    permission error only for `target`, its lock or a hidden sibling, unless `anywhere`), else `error` itself."""
    target = Path(target)
    if error.errno not in _FULL | _READ_ONLY or (isinstance(error, DestinationError) and error.filename == str(target)):
        return error
    folder = Path(os.path.abspath(target.parent))
    if error.errno in {errno.EACCES, errno.EPERM} and not anywhere and not _beside(error.filename, target, folder):
        return error
    if error.errno in _FULL:
        advice = "free space on that disk, or choose a folder on another one, and run again"
    else:
        advice = f"{folder} cannot be written: make it writable, or choose a writable folder"
    detail = f"{os.strerror(error.errno or 0)}: {error.filename}" if isinstance(error, DestinationError) else error
    return DestinationError(error.errno, f"{target}: cannot write {what} ({detail}); {advice}", str(target))


@contextlib.contextmanager
def writing_into(target: str | os.PathLike, what: str = "it", *, anywhere: bool = False) -> Iterator[None]:
    """Turn a full disk or an unwritable folder met inside the block into a DestinationError naming `target` (a
    permission error only for `target`, its lock and staging, unless `anywhere`); other errors pass unchanged."""
    try:
        yield
    except OSError as error:
        converted = _destination_error(error, target, what, anywhere=anywhere)
        if converted is error:
            raise
        raise converted from error


def _beside(filename: object, target: Path, folder: Path) -> bool:
    """True when `filename` is `target`, its lock, or inside a hidden sibling of it (a staging folder)."""
    if not isinstance(filename, str):
        return False
    parts = Path(os.path.abspath(filename)).parts
    if parts[: len(folder.parts)] != folder.parts or len(parts) == len(folder.parts):
        return False
    first = parts[len(folder.parts)]
    return first in (target.name, lock_path_of(target).name) or first.startswith(hidden_name(target, ""))


def hidden_name(target: str | os.PathLike, suffix: str) -> str:
    """`.{name}.{suffix}` for a sibling of `target`, its name shortened (a digest kept) so that the whole fits."""
    name = Path(target).name
    if len(name.encode("utf-8", "surrogateescape")) > _HIDDEN_NAME_BYTES:
        digest = hashlib.blake2b(name.encode("utf-8", "surrogateescape"), digest_size=4).hexdigest()
        head = name.encode("utf-8", "surrogateescape")[: _HIDDEN_NAME_BYTES - 9].decode("utf-8", "ignore")
        name = f"{head}~{digest}"
    return f".{name}.{suffix}"


def sibling_path(target: str | os.PathLike, suffix: str) -> Path:
    """`target.suffix` beside `target` (`f.tgz.part`), or a shortened hidden name when that would not fit."""
    target = Path(target)
    fits = len(target.name.encode("utf-8", "surrogateescape")) + len(suffix) + 1 <= NAME_MAX
    return target.with_name(f"{target.name}.{suffix}" if fits else hidden_name(target, suffix))


def lock_path_of(target: str | os.PathLike) -> Path:
    """The lock file beside `target`: `target.lock`, or a shortened hidden name when that would not fit."""
    return sibling_path(target, "lock")


@contextlib.contextmanager
def file_lock(target: str | os.PathLike, *, on_wait: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """Hold an exclusive inter-process lock on `target.lock` (beside `target`) for the duration of the block.

    The lock is released by the kernel when the holder exits or is killed, so a crashed writer never blocks others.
    `on_wait(lock_path)` is called once when another process holds the lock, before waiting for it. The lock file
    is opened as a regular file without following a link (a FIFO, folder or planted link there is named); a folder
    where it cannot be created (read-only) is a DestinationError naming the folder.
    """
    lock_path = lock_path_of(target)
    with writing_into(lock_path, "the lock file that lets processes take turns", anywhere=True):
        make_dirs(lock_path.parent)
        handle = open_regular(lock_path, "r+b", role="a lock file")
    with handle:
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait(lock_path)
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield lock_path
        finally:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _host() -> str:
    return (re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname()) or "host")[:64]


def staging_path(target: str | os.PathLike) -> Path:
    """A private, unique sibling path of `target` to build into (same file system, so the final rename is atomic).

    The name carries this machine's name and the process id, so leftovers of a killed writer can be recognised.
    """
    target = Path(target)
    return target.with_name(hidden_name(target, f"staging-{_host()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"))


def remove_stale_staging(target: str | os.PathLike) -> list[Path]:
    """Delete what killed writers of `target` on this machine left: staging folders and folders a publish set aside.

    Call it only while holding `file_lock(target)`: every writer builds under that lock, so any staging of `target`
    still there was left by a writer that died (the kernel released its lock). Leftovers named for other machines
    sharing the folder are kept, in case their lock does not reach this one.
    """
    target = Path(target)
    stale = _leftovers(target)
    for path in stale:
        _remove(path)
    return stale


def _leftovers(target: Path) -> list[Path]:
    """Staging folders (and their `.unpacked` siblings) and set-aside old folders of `target` named for this host."""
    host, stem = re.escape(_host()), re.escape(hidden_name(target, ""))  # ".{name}." (shortened when long)
    pattern = re.compile(rf"^{stem}(?:staging|old)-{host}-\d+-[0-9a-f]{{8}}(?:\.unpacked)?$")
    return [p for p in (target.parent.iterdir() if target.parent.is_dir() else ()) if pattern.match(p.name)]


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
        aside = target.with_name(hidden_name(target, f"old-{_host()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"))
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
    make_dirs(Path(target).parent)
    if folder:
        path.mkdir()
    try:
        yield path
    except BaseException:
        _remove(path)
        raise
    publish(path, target)


def sources_key(samples: Sequence[tuple[str | os.PathLike, int]], *, content: bool = False) -> str:
    """What a build was made from, as a key: every source's path, label, size and modification time, so a build is
    made again when a source is replaced, edited, relabelled, added or removed (one stat a file: nothing is read).

    An edit that keeps both the size and the modification time is missed: `cp -p` or `rsync -t` of another file of
    the same size over a source, or a tool that restores the time. `content=True` hashes every file's bytes
    instead of its time (it reads the whole set on every call, as the SR cache's fingerprint does).
    """
    digest = hashlib.blake2b(digest_size=16)
    for path, label in samples:
        info = os.stat(path)
        stamp = content_digest(path) if content else str(info.st_mtime_ns)
        digest.update(f"{os.path.abspath(path)}\0{int(label)}\0{info.st_size}\0{stamp}\n".encode())
    return digest.hexdigest()


def content_digest(path: str | os.PathLike) -> str:
    """The 16-byte BLAKE2b of a file's bytes, read a MiB at a time (a regular file only), in hex."""
    digest = hashlib.blake2b(digest_size=16)
    with open_regular(path, role="a source file") as f:
        for block in iter(lambda: f.read(len(_ZEROS)), b""):
            digest.update(block)
    return digest.hexdigest()


def build_once(
    target: str | os.PathLike,
    build: Callable[[Path], None],
    *,
    is_complete: Callable[[Path], bool],
    folder: bool = True,
    owns: Callable[[str], bool] | None = None,
) -> bool:
    """Make `target` exist and be complete, building it at most once however many processes ask at the same time.

    Under the lock beside `target`: if `is_complete(target)` (another process finished while this one waited), do
    nothing; else remove leftovers of killed builders, call `build(staging)` on a private staging folder (or file,
    with `folder=False`), and publish it in one rename only if `build` returned without error, so a half build is
    never seen. `build` should verify what it made and raise when it is not right; a full disk or a folder that
    cannot be written is a DestinationError naming `target`. Returns True when this call built.

    A link at `target` is followed (the build goes beside the real folder, and the link stays). Before anything is
    built, a target of the other kind (a file where the folder goes) is a DestinationError, and so is a folder
    holding an entry `owns(name)` does not accept, which publishing would delete (a folder of the user's photos).
    """
    target = _buildable(Path(target), folder, owns)
    if is_complete(target):  # before any lock: a complete target in a read-only folder is used as it is
        if _leftovers(target):  # a publish killed after its rename left the old folder set aside: clear it
            with file_lock(target):
                remove_stale_staging(target)
        return False
    with file_lock(target):
        remove_stale_staging(target)
        if is_complete(target):
            return False
        with writing_into(target, "the build"), staged(target, folder=folder) as staging:
            build(staging)
    return True


def _buildable(target: Path, folder: bool, owns: Callable[[str], bool] | None) -> Path:
    """`target`, or the folder a link there points to; DestinationError for what publishing it must not replace."""
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    if not os.path.lexists(target):
        return target
    mode, kind = os.lstat(target).st_mode, "folder" if folder else "file"
    if stat.S_ISDIR(mode) != folder:
        raise DestinationError(
            errno.ENOTDIR if folder else errno.EISDIR,
            f"{target}: is {describe_mode(mode)}, where the build puts a {kind}; it is left as it is: move it "
            f"away, or choose another {kind}",
            str(target),
        )
    foreign = sorted(n for n in os.listdir(target) if not (owns(n) or n in _DESKTOP_FILES)) if folder and owns else []
    if foreign:
        raise DestinationError(
            errno.EEXIST,
            f"{target}: holds {len(foreign)} entries this build did not make ({', '.join(foreign[:3])}"
            f"{', ...' if len(foreign) > 3 else ''}); building there would replace the folder and delete them: "
            "choose an empty or new folder, or move them away",
            str(target),
        )
    return target


def reserve_file(path: str | os.PathLike, size: int) -> None:
    """Create `path` with `size` bytes really allocated on disk (not a sparse file), or raise an OSError naming it.

    A memory-mapped sparse file on a full disk kills the process with SIGBUS at the first page that cannot be
    stored; reserving the blocks first turns that into this error, before any work is done.
    """
    with open_regular(path, "wb", exclusive=True, role="a store being reserved") as f:
        try:
            try:
                if not hasattr(os, "posix_fallocate"):  # macOS, Windows: write the zeros
                    _write_zeros(f, size)
                elif size:
                    os.posix_fallocate(f.fileno(), 0, size)
            except OSError as error:
                if error.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
                _write_zeros(f, size)  # a file system without fallocate
        except OSError as error:
            raise OSError(
                error.errno,
                f"{path}: cannot reserve {size} bytes ({error.strerror}); free disk space or write somewhere else",
                str(path),
            ) from error


def _write_zeros(f: Any, size: int) -> None:
    for start in range(0, size, len(_ZEROS)):
        f.write(_ZEROS[: min(len(_ZEROS), size - start)])
    f.flush()


def write_text_atomically(target: str | os.PathLike, text: str) -> Path:
    """Write `text` to `target` through a staging file and one rename."""
    with staged(target) as path, open_regular(path, "wb", exclusive=True, role="a scratch file") as f:
        f.write(text.encode("utf-8"))
    return Path(target)
