"""Verified, resumable downloads and archive extraction that refuses unsafe members and archive bombs, safe when
several processes fetch or extract into the same folder at once.

Copy with: atomic.py (the inter-process lock, staging folders published in one rename).
Needs: tqdm (the download's progress bar).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import platform
import re
import shutil
import stat
import tarfile
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from tqdm.auto import tqdm

from .atomic import build_once, file_lock, publish

CHUNK_BYTES = 1 << 20
MIB = 1 << 20


class ChecksumMismatchError(RuntimeError):
    """A downloaded or existing file does not have the expected digest (`kind_found`: what the file looks like)."""

    kind_found: str | None = None


class IncompleteDownloadError(ConnectionError):
    """The transfer stopped before the whole file arrived; the partial file is kept for resuming."""


class BadArchiveError(ValueError):
    """A file is not a readable archive of the expected kind: an HTML error page, a zip, a truncated download."""


class UnsafeArchiveError(ValueError):
    """An archive holds a member that would escape the destination, is not a plain file or folder, or is too big."""


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """Return the hex digest of a file's bytes (`algorithm`: any hashlib name, e.g. sha256, md5)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


_MAGIC = (
    (b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"PK\x03\x04", "zip"), (b"PK\x05\x06", "zip"),
)  # fmt: skip
_KIND_NAMES = {
    "gzip": "a gzip-compressed file", "bzip2": "a bzip2-compressed file", "xz": "an xz-compressed file",
    "zip": "a zip archive", "tar": "an uncompressed tar archive", "html": "an HTML page (an error or login page?)",
    "empty": "an empty file", "unknown": "data of an unknown kind",
}  # fmt: skip


def file_kind(path: str | os.PathLike) -> str:
    """What a file's first bytes say it is: gzip, bzip2, xz, zip, tar, html, empty or unknown."""
    with open(path, "rb") as f:
        head = f.read(512)
    if not head:
        return "empty"
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head[257:262] == b"ustar":
        return "tar"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return "html" if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<?xml")) else "unknown"


def describe_kind(kind: str) -> str:
    """A phrase for a `file_kind` result, e.g. 'an HTML page (an error or login page?)'."""
    return _KIND_NAMES.get(kind, kind)


def _expected(sha256: str | None, md5: str | None) -> tuple[str, str] | None:
    if sha256:
        return "sha256", sha256.lower()
    if md5:
        return "md5", md5.lower()
    return None


def _mismatch(path: Path, sha256: str | None, md5: str | None) -> tuple[str, str, str] | None:
    """Return (algorithm, got, expected) when `path` does not match the expected digest, else None."""
    expected = _expected(sha256, md5)
    if expected is None:
        return None
    algorithm, want = expected
    got = file_digest(path, algorithm)
    return None if got == want else (algorithm, got, want)


def _mismatch_error(
    path: Path, algorithm: str, got: str, want: str, *, source: str, kind: str | None = None
) -> ChecksumMismatchError:
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
    problem = _mismatch(Path(path), sha256, md5)
    if problem:
        raise _mismatch_error(Path(path), *problem, source=source, kind=kind)


def _open(url: str, offset: int, timeout: float):
    request = urllib.request.Request(url, headers={"User-Agent": "feeding-the-gpu-course"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 (http/https URLs from our own constants)


def _start(url: str, part: Path, timeout: float):
    """Open `url`, resuming `part` with a Range request; return (response or None when `part` is whole, offset).

    A 206 reply is used only when its Content-Range starts exactly where `part` ends; any other reply to a Range
    request (a 200 with the whole body, a 206 for other bytes) starts the file again from byte 0.
    """
    offset = part.stat().st_size if part.exists() else 0
    try:
        response = _open(url, offset, timeout)
    except urllib.error.HTTPError as error:
        if error.code == 416 and offset:  # nothing left to send: the partial file may already be whole
            return None, offset
        raise
    if not offset:
        return response, 0
    content_range = re.match(r"bytes (\d+)-", response.headers.get("Content-Range", ""))
    if response.status == 206 and content_range and int(content_range.group(1)) == offset:
        return response, offset
    response.close()
    part.unlink(missing_ok=True)
    return _open(url, 0, timeout), 0


def _receive(response, part: Path, offset: int, *, url: str, progress: bool) -> None:
    """Write a response body to `part` (appending from `offset`), or raise IncompleteDownloadError."""
    length = response.headers.get("Content-Length")
    total = offset + int(length) if length is not None else None
    received = offset
    with open(part, "ab" if offset else "wb") as out, tqdm(
        total=total, initial=offset, unit="B", unit_scale=True, desc=part.name, disable=not progress
    ) as bar:
        try:
            for block in iter(lambda: response.read(CHUNK_BYTES), b""):
                out.write(block)
                received += len(block)
                bar.update(len(block))
        except (OSError, ConnectionError) as error:  # includes http.client.IncompleteRead and timeouts
            raise IncompleteDownloadError(
                f"{url}: transfer broke off after {received} bytes ({error}); the partial file is kept "
                f"at {part} and the next run resumes it"
            ) from error
    if total is not None and received < total:
        raise IncompleteDownloadError(
            f"{url}: transfer stopped after {received} of {total} bytes; the partial file is kept at "
            f"{part} and the next run resumes it"
        )


def download(
    url: str,
    dest: str | os.PathLike,
    *,
    sha256: str | None = None,
    md5: str | None = None,
    kind: str | None = None,
    insecure: bool = False,
    timeout: float = 30.0,
    progress: bool = True,
) -> Path:
    """Download `url` to `dest` through `dest.part` (resumed with an HTTP Range request), verify, then rename.

    A digest (`sha256` or `md5`) is required; only tests pass `insecure=True` to skip it. With `kind` (a `file_kind`
    result such as "gzip"), a file of another kind (an HTML error page) is refused and named as such. A file is only
    ever at `dest` once complete and verified; an interrupted transfer raises IncompleteDownloadError and leaves
    `dest.part` for the next call to resume. Processes downloading the same `dest` take turns (a lock beside it).
    """
    if _expected(sha256, md5) is None and not insecure:
        raise ValueError(
            f"download({url!r}): pass sha256= or md5= (the digest published with the file); an unverified "
            "download could be anything. insecure=True skips the check and is meant for tests only"
        )
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(dest):  # one transfer at a time; the others then find the verified file
        if dest.exists():
            verify_file(dest, sha256=sha256, md5=md5, source="an earlier download", kind=kind)
            if kind is not None and file_kind(dest) != kind:
                found = describe_kind(file_kind(dest))
                raise BadArchiveError(f"{dest}: is {found}, not {describe_kind(kind)}; delete it and run again")
            return dest
        part = dest.with_name(dest.name + ".part")
        response, offset = _start(url, part, timeout)
        if response is not None:
            with response:
                _receive(response, part, offset, url=url, progress=progress)
        _check_download(part, dest, url=url, sha256=sha256, md5=md5, kind=kind)
        publish(part, dest)
    return dest


def _check_download(part: Path, dest: Path, *, url: str, sha256: str | None, md5: str | None, kind: str | None) -> None:
    """Set a finished transfer aside as `dest.rejected` and raise when its digest or kind is wrong."""
    problem = _mismatch(part, sha256, md5)
    found = file_kind(part) if kind is not None else None
    if problem is None and found == kind:
        return
    rejected = dest.with_name(dest.name + ".rejected")
    os.replace(part, rejected)  # never resume onto bytes we know are wrong
    if problem:
        raise _mismatch_error(rejected, *problem, source=url, kind=kind)
    raise BadArchiveError(
        f"{url} sent {describe_kind(found)}, not {describe_kind(kind)}; it is kept as {rejected}. "
        "Delete it and run again later, or check the address."
    )


# --- extraction ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExtractLimits:
    """What an archive may hold: at most `members` entries, `member_bytes` per file and `total_bytes` in all."""

    members: int
    member_bytes: int
    total_bytes: int

    @classmethod
    def for_archive(cls, archive: str | os.PathLike) -> ExtractLimits:
        """Generous limits for an archive nothing is known about: 10,000 members and 8x its size (at least 64 MiB)."""
        total = max(64 * MIB, 8 * Path(archive).stat().st_size)
        return cls(members=10_000, member_bytes=total, total_bytes=total)


def _check_member(member: tarfile.TarInfo, archive: Path) -> None:
    name = member.name
    absolute = name.startswith("/") or (os.name == "nt" and (PureWindowsPath(name).drive or name.startswith("\\")))
    if absolute:
        raise UnsafeArchiveError(f"{archive}: member {name!r} has an absolute path; refusing to extract anything")
    if ".." in PurePosixPath(name).parts or (os.name == "nt" and ".." in PureWindowsPath(name).parts):
        raise UnsafeArchiveError(f"{archive}: member {name!r} climbs out with '..'; refusing to extract anything")
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


def _checked_members(tar: tarfile.TarFile, archive: Path, limits: ExtractLimits) -> list[tarfile.TarInfo]:
    """Read the members one header at a time, refusing the archive at the first unsafe member or exceeded limit."""
    members: list[tarfile.TarInfo] = []
    total = 0
    for member in tar:
        if len(members) == limits.members:
            raise UnsafeArchiveError(
                f"{archive}: more than {limits.members} members; not the expected archive (pass larger limits only "
                "if you trust it)"
            )
        _check_member(member, archive)
        total += member.size
        if member.size > limits.member_bytes or total > limits.total_bytes:
            raise UnsafeArchiveError(
                f"{archive}: member {member.name!r} ({member.size} bytes) takes the archive past its limits "
                f"({limits.member_bytes} bytes a member, {limits.total_bytes} in all); not the expected archive "
                "(pass larger limits only if you trust it)"
            )
        members.append(member)
    return members


def _data_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """tarfile's `data` filter, and setuid, setgid and sticky bits removed in any case."""
    member = tarfile.data_filter(member, dest)
    if member.mode is not None:
        member = member.replace(mode=member.mode & ~(stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX), deep=False)
    return member


def safe_extract(
    archive: str | os.PathLike, dest: str | os.PathLike, *, limits: ExtractLimits | None = None
) -> list[Path]:
    """Extract a tar archive into `dest` after checking every member and the `limits` (default: for_archive).

    Refuses absolute paths, '..', links, devices, sparse files and archives past the limits before writing
    anything, then extracts through tarfile's `data` filter (which also stops writes through links already in
    `dest`); a Python without that filter is refused.
    """
    archive, dest = Path(archive), Path(dest)
    if not hasattr(tarfile, "data_filter"):
        raise UnsafeArchiveError(
            f"{archive}: this Python ({platform.python_version()}) has no tarfile extraction filters, which keep "
            "writes inside the destination; use Python 3.10.12, 3.11.4, 3.12 or newer"
        )
    limits = limits or ExtractLimits.for_archive(archive)
    try:
        with tarfile.open(archive) as tar:
            members = _checked_members(tar, archive, limits)  # all checked before anything is written
            dest.mkdir(parents=True, exist_ok=True)
            tar.extractall(dest, members=members, filter=_data_filter)
    except tarfile.FilterError as error:
        raise UnsafeArchiveError(f"{archive}: {error}; refusing to extract the rest") from error
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as error:
        kind = file_kind(archive)
        compressed_or_tar = kind in ("gzip", "bzip2", "xz", "tar")
        what = "it is truncated or damaged" if compressed_or_tar else f"it is {describe_kind(kind)}"
        detail = " ".join(str(error).split())[:160]
        raise BadArchiveError(
            f"{archive}: not a readable tar archive ({what}; {type(error).__name__}: {detail}). Delete it and run "
            "again to download it afresh"
        ) from error
    return [dest / m.name for m in members if m.isfile()]


def _unpack_top(archive: Path, staging: Path, top: str, limits: ExtractLimits | None) -> None:
    """Extract `archive` and move the contents of its folder `top` into `staging`."""
    unpacked = staging / ".unpacked"
    safe_extract(archive, unpacked, limits=limits)
    if not (unpacked / top).is_dir():
        raise BadArchiveError(f"{archive}: expected a top-level folder {top!r}; it is not there")
    for child in (unpacked / top).iterdir():
        os.replace(child, staging / child.name)
    shutil.rmtree(unpacked)


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
    published in one rename, and on an existing `parent/top` to decide whether it is already done. Processes
    extracting the same archive take turns; the later ones find the finished folder and return it.
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
