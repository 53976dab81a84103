"""Extracting tar archives that refuse unsafe members and archive bombs, checked header by header before `tarfile`
trusts them, and published whole or not at all, safe when several processes extract into the same folder at once;
and checking that a file is the one expected (its digest, and its kind from its first bytes) before it is trusted.

Extraction goes through tarfile's `data` filter where this Python has it (3.10.12, 3.11.4, 3.12 and newer); on older
releases (Debian 12's 3.11.2, for one) this module writes the members itself, with the same rules: every folder made
here and checked not to be a link, every file created new without following links, no setuid/setgid/sticky bits, no
ownership from the archive. Either way the raw headers are pre-scanned first (`tar_scan.py`), which also keeps
tarfile's quadratic pax parser (CVE-2024-6232, fixed in 3.10.15, 3.11.10, 3.12.6, 3.13) off any large header.

Example:
    >>> import io, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     archive = Path(tmp) / "data.tar.gz"
    ...     with tarfile.open(archive, "w:gz") as tar:
    ...         tar.addfile(tarfile.TarInfo("data/empty.txt"), io.BytesIO())
    ...     print(file_kind(archive), os.listdir(extract_into(archive, tmp, "data")))  # checked, then published whole
    gzip ['empty.txt']

Copy with: tar_scan.py (the pre-scan, file kinds, limits), safe_open.py (regular files only) and atomic.py (the
inter-process lock, staging folders published in one rename).
Needs: the standard library only.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import shutil
import stat
import sys
import tarfile
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath, PureWindowsPath

from .atomic import build_once, writing_into
from .safe_open import make_dirs, open_regular
from .tar_scan import (
    BadArchiveError,
    ExtractLimits,
    ScannedMember,
    UnsafeArchiveError,
    describe_kind,
    kind_of_head,
    scan_tar,
)

__all__ = [
    "BadArchiveError",
    "ChecksumMismatchError",
    "ExtractLimits",
    "UnsafeArchiveError",
    "extract_into",
    "file_digest",
    "file_kind",
    "safe_extract",
    "verify_file",
]

MAX_DEPTH = 255  # folders in a member's path; deeper is no dataset (and tarfile's recursive makedirs would fail)
PATH_MAX = 4096 if sys.platform.startswith("linux") else 1024  # bytes in a whole path (macOS, the BSDs: 1024)
_FILTER_ERRORS = (tarfile.FilterError,) if hasattr(tarfile, "FilterError") else ()
_SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
CHUNK_BYTES = 1 << 20


class ChecksumMismatchError(RuntimeError):
    """A downloaded or existing file does not have the expected digest (`kind_found`: what the file looks like)."""

    kind_found: str | None = None


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """Return the hex digest of a file's bytes (`algorithm`: any hashlib name, e.g. sha256, md5)."""
    digest = hashlib.new(algorithm)
    with open_regular(path, role="a file to verify") as f:
        for block in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def file_kind(path: str | os.PathLike) -> str:
    """What a file's first bytes say it is: gzip, bzip2, xz, zip, tar, html, empty or unknown."""
    with open_regular(path, role="a downloaded file") as f:
        return kind_of_head(f.read(512))


def _expected(sha256: str | None, md5: str | None) -> tuple[str, str] | None:
    return ("sha256", sha256.lower()) if sha256 else ("md5", md5.lower()) if md5 else None


def mismatch(path: Path, sha256: str | None, md5: str | None) -> tuple[str, str, str] | None:
    """(algorithm, got, expected) when `path` does not match the digest given (sha256 before md5), else None."""
    expected = _expected(sha256, md5)
    if expected is None:
        return None
    algorithm, want = expected
    got = file_digest(path, algorithm)
    return None if got == want else (algorithm, got, want)


def mismatch_error(
    path: Path, algorithm: str, got: str, want: str, *, source: str, kind: str | None = None
) -> ChecksumMismatchError:
    """The error for a digest mismatch, saying what the file looks like and what to do."""
    found = file_kind(path)
    if kind is not None and found != kind:
        advice = (
            f"It is {describe_kind(found)}, not {describe_kind(kind)}: the server sent something else, so its digest "
            f"means nothing. Delete {path} and run again later."
        )
    else:
        advice = (
            f"Delete {path} and run again to download it afresh. Trust a new digest only after checking where it "
            f"came from (the publisher's own page, over HTTPS): a changed file is more often a broken or tampered "
            f"download than a new release."
        )
    error = ChecksumMismatchError(f"{path} (from {source}): {algorithm.upper()} is {got}, expected {want}. {advice}")
    error.kind_found = found
    return error


def verify_file(
    path: Path, *, sha256: str | None = None, md5: str | None = None, source: str = "disk", kind: str | None = None
) -> None:
    """Raise ChecksumMismatchError, saying how to proceed, unless `path` has the expected digest."""
    problem = mismatch(Path(path), sha256, md5)
    if problem:
        raise mismatch_error(Path(path), *problem, source=source, kind=kind)


def is_verified(path: Path, *, sha256: str | None, md5: str | None, kind: str | None = None) -> bool:
    """True when `path` is there with the expected digest and kind, False when absent; a wrong one raises
    (ChecksumMismatchError, BadArchiveError). It only reads, so a file in a read-only folder is fine."""
    if not os.path.lexists(path):
        return False
    verify_file(path, sha256=sha256, md5=md5, source="an earlier download", kind=kind)
    if kind is not None and (found := file_kind(path)) != kind:
        raise BadArchiveError(f"{path}: is {describe_kind(found)}, not {describe_kind(kind)}; delete it and run again")
    return True


def _check_member(member: tarfile.TarInfo, archive: Path) -> None:
    name = member.name
    absolute = name.startswith("/") or (os.name == "nt" and (PureWindowsPath(name).drive or name.startswith("\\")))
    if absolute:
        raise UnsafeArchiveError(f"{archive}: member {name!r} has an absolute path; refusing to extract anything")
    if ".." in PurePosixPath(name).parts or (os.name == "nt" and ".." in PureWindowsPath(name).parts):
        raise UnsafeArchiveError(f"{archive}: member {name!r} climbs out with '..'; refusing to extract anything")
    if len(PurePosixPath(name).parts) > MAX_DEPTH:
        raise UnsafeArchiveError(
            f"{archive}: member {name[:60]!r}... is {len(PurePosixPath(name).parts)} folders deep, past {MAX_DEPTH}; "
            "no dataset is, refusing to extract anything"
        )
    if not PurePosixPath(name).parts and not member.isdir():
        raise UnsafeArchiveError(
            f"{archive}: member {name!r} is a file named as the destination folder itself; the archive is crafted or "
            "damaged, refusing to extract anything"
        )
    if member.issym() or member.islnk():
        raise UnsafeArchiveError(
            f"{archive}: member {name!r} is a link to {member.linkname!r}; refusing to extract anything"
        )
    if not (member.isfile() or member.isdir()):
        raise UnsafeArchiveError(
            f"{archive}: member {name!r} is a device, FIFO or other special file; refusing to extract anything"
        )
    if member.issparse():
        raise UnsafeArchiveError(
            f"{archive}: member {name!r} is a sparse file ({member.size} bytes once written out); datasets hold "
            "none, refusing to extract anything"
        )


def _check_clashes(members: list[tarfile.TarInfo], archive: Path, *, fold: bool = False) -> None:
    """Refuse a name that one member makes a file and another a folder (a later file may replace an earlier one); with
    `fold` (a case-insensitive destination), also a file whose name differs only in case from another member's."""
    kinds: dict[tuple[str, ...], tuple[str, str]] = {}  # (folded) parts -> (file or folder, the name as written)
    for member in members:
        parts = PurePosixPath(member.name).parts
        for depth in range(1, len(parts) + 1):
            kind, name = "file" if depth == len(parts) and not member.isdir() else "folder", "/".join(parts[:depth])
            seen_kind, seen_name = kinds.setdefault(
                tuple(p.casefold() for p in parts[:depth]) if fold else parts[:depth], (kind, name)
            )
            if seen_kind != kind:
                other = "it" if seen_name == name else repr(seen_name)
                raise UnsafeArchiveError(
                    f"{archive}: member {member.name!r} makes {name!r} a {kind}, where another member makes {other} a "
                    f"{seen_kind}; the archive is damaged or crafted, refusing to extract anything"
                )
            if seen_name != name and "file" in (kind, seen_kind):
                raise UnsafeArchiveError(
                    f"{archive}: members {seen_name!r} and {name!r} differ only in case, so they are one file on the "
                    "case-insensitive file system of the destination and one would replace the other; extract it "
                    "on a case-sensitive file system, refusing to extract anything"
                )


def _folds_case(dest: Path) -> bool:
    """True when `dest` (or, before it exists, its nearest existing parent) is on a case-insensitive file system
    (macOS and Windows by default): a probe folder made under a lower-case name is found under its upper-case one."""
    folder = Path(os.path.abspath(dest))
    while not folder.is_dir() and folder.parent != folder:
        folder = folder.parent
    probe = folder / f".case-probe-{uuid.uuid4().hex[:8]}"
    probe.mkdir()
    try:
        return os.path.isdir(folder / probe.name.upper())
    finally:
        probe.rmdir()


def _check_path_lengths(members: list[tarfile.TarInfo], dest: Path, archive: Path) -> None:
    """Refuse a member whose path under `dest` would be longer than the PATH_MAX bytes a path may have."""
    base = len(os.fsencode(os.path.abspath(dest))) + 1
    for member in members:
        length = base + len(member.name.encode("utf-8", "surrogateescape"))
        if length >= PATH_MAX:
            raise UnsafeArchiveError(
                f"{archive}: member {member.name[:60]!r}... would have a path of {length} bytes in {dest}, past the "
                f"{PATH_MAX} a path may have; extract it into a folder with a shorter path (no dataset's names are "
                "that long: if it is not yours, it is crafted)"
            )


def _checked_members(tar: tarfile.TarFile, archive: Path, scanned: list[ScannedMember]) -> list[tarfile.TarInfo]:
    """tarfile's members, each checked, and refused unless they are the ones the raw headers describe."""
    members: list[tarfile.TarInfo] = []
    for member in tar:
        _check_member(member, archive)
        members.append(member)
    _check_clashes(members, archive)
    if [(m.size, m.offset_data) for m in members] != [(s.size, s.offset_data) for s in scanned]:
        raise BadArchiveError(
            f"{archive}: tarfile reads {len(members)} members where the raw headers describe {len(scanned)} (or other "
            "sizes or places); the archive is damaged or crafted. Delete it and run again to download it afresh"
        )
    return members


def _data_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """tarfile's `data` filter, and setuid, setgid and sticky bits removed in any case."""
    member = tarfile.data_filter(member, dest)
    if member.mode is not None:
        member = member.replace(mode=member.mode & ~_SPECIAL_BITS, deep=False)
    return member


def _real_folder(dest: Path, relative: PurePosixPath, archive: Path) -> Path:
    """`dest/relative`, each folder on the way made here or checked to be a folder that is not a link."""
    folder = dest
    for part in relative.parts:
        folder = folder / part
        try:
            os.mkdir(folder)
        except FileExistsError:
            if folder.is_symlink() or not folder.is_dir():
                raise UnsafeArchiveError(
                    f"{archive}: {folder} is already there and is a link or not a folder; refusing to write through it"
                ) from None
    return folder


def _file_mode(mode: int) -> int:
    """What the `data` filter keeps of a file's mode: owner read/write, no group/other write, exec only if owner's."""
    mode = (mode & 0o755) | 0o600
    return mode if mode & 0o100 else mode & ~0o111


def _write_members(tar: tarfile.TarFile, members: list[tarfile.TarInfo], dest: Path, archive: Path) -> None:
    """Extract without tarfile's filters (a Python that lacks them), under the same rules."""
    for member in members:
        relative = PurePosixPath(member.name)
        if member.isdir():
            _real_folder(dest, relative, archive)
            continue
        target = _real_folder(dest, relative.parent, archive) / relative.name
        if os.path.lexists(target):  # a later member of the same name replaces an earlier one, as tar does
            if not stat.S_ISREG(os.lstat(target).st_mode):
                raise UnsafeArchiveError(f"{archive}: {target} is already there and is not a plain file; refusing")
            os.unlink(target)
        source = tar.extractfile(member)
        assert source is not None  # a regular file member always has data
        with source, open_regular(target, "wb", exclusive=True, role="an extracted file") as out:
            shutil.copyfileobj(source, out, 1 << 20)
        os.chmod(target, _file_mode(member.mode))
        os.utime(target, (member.mtime, member.mtime))


def _check_written(members: list[tarfile.TarInfo], dest: Path, archive: Path) -> list[Path]:
    sizes = {m.name: m.size for m in members if m.isfile()}  # the last member of a name is the one on disk
    for name, size in sizes.items():
        got = os.lstat(dest / name).st_size
        if got != size:
            raise BadArchiveError(f"{archive}: {dest / name} was written with {got} of its {size} bytes; damaged")
    return [dest / name for name in sizes]


def safe_extract(
    archive: str | os.PathLike, dest: str | os.PathLike, *, limits: ExtractLimits | None = None
) -> list[Path]:
    """Extract a tar archive into `dest` after checking every header, member and the `limits` (default: for_archive).

    Refuses absolute paths, '..', links, devices, sparse files, negative sizes, oversized meta headers, names no file
    system holds (a path past PATH_MAX in `dest` included), a name that is a file in one member and a folder in
    another (or, on a case-insensitive file system, a file in another case), impossible modification times,
    archives past the limits and damaged or truncated streams (read to their end, so a bad CRC shows) before writing anything, then extracts through
    tarfile's `data` filter (which also stops writes through links already in `dest`), or under the same rules by
    itself on a Python without that filter. A full disk or a read-only `dest` is a DestinationError naming it.
    """
    archive, dest = Path(archive), Path(dest)
    limits = limits or ExtractLimits.for_archive(archive)
    with open_regular(archive, role="an archive") as f:
        scanned = scan_tar(f, limits, where=archive)
        f.seek(0)
        try:
            with tarfile.open(fileobj=f) as tar:
                members = _checked_members(tar, archive, scanned)  # all checked before anything is written
                _check_path_lengths(members, dest, archive)
                with writing_into(dest, f"the members of {archive.name}", anywhere=True):  # full, read-only
                    if _folds_case(dest):
                        _check_clashes(members, archive, fold=True)
                    make_dirs(dest)
                    if hasattr(tarfile, "data_filter"):
                        tar.extractall(dest, members=members, filter=_data_filter)
                    else:
                        _write_members(tar, members, dest, archive)
        except _FILTER_ERRORS as error:
            raise UnsafeArchiveError(f"{archive}: {error}; refusing to extract the rest") from error
        except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError) as error:
            detail = " ".join(str(error).split())[:160]
            raise BadArchiveError(
                f"{archive}: not a readable tar archive (it is damaged; {type(error).__name__}: {detail}). Delete it "
                "and run again to download it afresh"
            ) from error
    return _check_written(members, dest, archive)


def _unpack_top(archive: Path, staging: Path, top: str, limits: ExtractLimits | None) -> None:
    """Extract `archive` beside `staging` and move the contents of its folder `top` into `staging`.

    The extraction folder is a sibling named after the private staging folder, so no member name can collide with
    it, and a killed extraction leaves it where `remove_stale_staging` finds it.
    """
    unpacked = staging.with_name(staging.name + ".unpacked")
    try:
        safe_extract(archive, unpacked, limits=limits)
        if not (unpacked / top).is_dir() or (unpacked / top).is_symlink():
            raise BadArchiveError(f"{archive}: expected a top-level folder {top!r}; it is not there")
        for child in (unpacked / top).iterdir():
            os.replace(child, staging / child.name)
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)


def extract_into(
    archive: str | os.PathLike,
    parent: str | os.PathLike,
    top: str,
    *,
    verify: Callable[[Path], None] | None = None,
    limits: ExtractLimits | None = None,
) -> Path:
    """Safely extract `archive`, whose contents sit under folder `top`, to `parent/top`; return that folder.

    `verify(folder)` raises when a folder is not complete: it is run on the private extraction before it is
    published in one rename, and on an existing `parent/top` to decide whether it is already done. Nothing is
    published unless every member was written whole. Processes extracting the same archive take turns; the later
    ones find the finished folder and return it.
    """
    archive, target = Path(archive), Path(parent) / top

    def complete(folder: Path) -> bool:
        if not folder.is_dir():
            return False
        try:
            (verify or (lambda _: None))(folder)
        except Exception:  # noqa: BLE001 (any failure of the caller's check means: extract again)
            return False
        return True

    def build(staging: Path) -> None:
        _unpack_top(archive, staging, top, limits)
        if verify is not None:
            verify(staging)

    build_once(target, build, is_complete=complete)
    return target
