"""Opening data files as regular files only: a FIFO, device, folder or socket where a file is expected is named as
such at once (never read forever, never blocked on), and files this code writes never follow a planted link.

Readers follow a link the user made (a folder of links to images is common) but check what the open file really is
(`fstat` after an `O_NONBLOCK` open, so a FIFO cannot block the open and `/dev/zero` is refused). Writers open with
`O_NOFOLLOW`, and scratch names with `O_EXCL` as well, so a link someone else planted at a scratch name is refused
instead of redirecting the write into their file.

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     os.mkfifo(Path(tmp) / "data.bin")  # a FIFO where a file is expected: named at once, never read forever
    ...     try:
    ...         read_regular_bytes(Path(tmp) / "data.bin")
    ...     except NotRegularFileError as error:
    ...         print(str(error).split("; ")[0].replace(tmp, "TMP"))
    [Errno 22] TMP/data.bin: is a FIFO (named pipe), not a regular file

Copy alone.
Needs: the standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO, Any

try:
    import fcntl
except ImportError:  # Windows: no fcntl, and no O_NONBLOCK to clear
    fcntl = None  # type: ignore[assignment]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # 0 on Windows, where links need privileges to create
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


class NotRegularFileError(OSError):
    """A path where a regular file is expected is something else: a FIFO, directory, device, socket or link."""


def describe_mode(mode: int) -> str:
    """A phrase for what a `st_mode` is: 'a regular file', 'a FIFO (named pipe)', 'a directory', ..."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((phrase for test, phrase in _KINDS if test(mode)), "a special file")


def _refuse(path: Path, what: str, role: str) -> NotRegularFileError:
    return NotRegularFileError(
        errno.EINVAL,
        f"{path}: is {what}, not a regular file; {role} must be a plain file: remove or rename it "
        "(or point to the real file)",
        str(path),
    )


def _open_fd(path: Path, flags: int, role: str) -> int:
    """os.open with O_NONBLOCK, then fstat: the descriptor of a regular file, or NotRegularFileError naming it."""
    try:
        fd = os.open(path, flags | _NONBLOCK | _CLOEXEC | _BINARY, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP and flags & _NOFOLLOW:
            raise _refuse(path, "a symbolic link (not followed: someone else may have planted it)", role) from error
        if error.errno == errno.EEXIST and flags & os.O_EXCL:
            raise NotRegularFileError(
                errno.EEXIST,
                f"{path}: a scratch name already taken by {describe_mode(os.lstat(path).st_mode)}; "
                f"{role} is always created new here, so something planted or left it: remove it",
                str(path),
            ) from error
        if error.errno in (errno.EISDIR, errno.ENXIO):  # a folder opened for writing; a FIFO with no reader
            kind = "a directory" if error.errno == errno.EISDIR else describe_mode(os.lstat(path).st_mode)
            raise _refuse(path, kind, role) from error
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _refuse(path, describe_mode(mode), role)
    if _NONBLOCK and fcntl is not None:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_NONBLOCK)
    return fd


def open_regular(
    path: str | os.PathLike, mode: str = "rb", *, follow: bool | None = None, exclusive: bool = False, role: str = "it"
) -> IO[Any]:
    """Open `path` as a regular file, or raise NotRegularFileError naming what it is (FIFO, directory, device, link).

    `mode` is "rb", "r" (UTF-8 text), "wb", "ab" or "r+b". Reading follows links by default (the target is checked);
    writing does not (`follow=False`): a link at the path is refused. `exclusive=True` creates the file and fails
    when anything, a planted link included, is already there (for scratch names). `role` names the file in errors.
    """
    path = Path(path)
    writing = mode not in ("rb", "r")
    follow = not writing if follow is None else follow
    flags = {
        "rb": os.O_RDONLY,
        "r": os.O_RDONLY,
        "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
        "ab": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
        "r+b": os.O_RDWR | os.O_CREAT,
    }[mode]
    if exclusive:
        flags |= os.O_CREAT | os.O_EXCL
    if not follow:
        flags |= _NOFOLLOW
    if mode == "wb" and not exclusive:  # truncate only once we know it is a regular file: never empty a device
        flags &= ~os.O_TRUNC
    fd = _open_fd(path, flags, role)
    if mode == "wb" and not exclusive:
        os.ftruncate(fd, 0)
    if mode == "r":
        return os.fdopen(fd, "r", encoding="utf-8")
    return os.fdopen(fd, mode)


def read_regular_bytes(path: str | os.PathLike, *, role: str = "it") -> bytes:
    """The bytes of a regular file (a FIFO or device at `path` is refused, not read forever)."""
    with open_regular(path, role=role) as f:
        return f.read()


def check_regular(path: str | os.PathLike, *, role: str = "it") -> os.stat_result:
    """`lstat` of `path` when it is a regular file (not a link), else NotRegularFileError naming what it is."""
    path = Path(path)
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(path, describe_mode(info.st_mode), role)
    return info


def make_dirs(folder: str | os.PathLike) -> Path:
    """Create `folder` and its missing parents, like `mkdir -p`, without recursion (any depth), naming what blocks it.

    A parent that exists and is not a folder (a file, a FIFO) is named, with what to do.
    """
    folder = Path(os.path.abspath(folder))
    missing = []
    probe = folder
    while not probe.is_dir():
        if os.path.lexists(probe):
            what = describe_mode((os.stat if probe.exists() else os.lstat)(probe).st_mode)
            raise NotADirectoryError(
                errno.ENOTDIR,
                f"{probe}: is {what}, not a folder, so {folder} cannot be created there; remove it "
                "or choose another folder",
                str(probe),
            )
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for part in reversed(missing):
        try:
            os.mkdir(part)
        except FileExistsError:
            if not part.is_dir():
                raise
    return folder
