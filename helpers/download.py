"""Verified, resumable downloads and archive extraction that refuses unsafe members.

Copy with: atomic.py (staging folders published in one rename).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath

from tqdm.auto import tqdm

from .atomic import publish, staging_path

CHUNK_BYTES = 1 << 20


class ChecksumMismatchError(RuntimeError):
    """A downloaded or existing file does not have the expected digest."""


class IncompleteDownloadError(ConnectionError):
    """The transfer stopped before the whole file arrived; the partial file is kept for resuming."""


class UnsafeArchiveError(ValueError):
    """An archive holds a member that would escape the destination or is not a plain file or folder."""


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """Return the hex digest of a file's bytes (`algorithm`: any hashlib name, e.g. sha256, md5)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


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


def _mismatch_error(path: Path, algorithm: str, got: str, want: str, source: str) -> ChecksumMismatchError:
    return ChecksumMismatchError(
        f"{path} (from {source}): {algorithm.upper()} is {got}, expected {want}. The file is kept there so nothing "
        f"is lost. If the publisher changed the file and you trust it, pass the new digest {got} and run again; "
        f"otherwise delete {path} and run again to download it afresh."
    )


def verify_file(path: Path, sha256: str | None = None, md5: str | None = None, source: str = "disk") -> None:
    """Raise ChecksumMismatchError, saying how to proceed, unless `path` has the expected digest."""
    problem = _mismatch(Path(path), sha256, md5)
    if problem:
        raise _mismatch_error(Path(path), *problem, source=source)


def _open(url: str, offset: int, timeout: float):
    request = urllib.request.Request(url, headers={"User-Agent": "feeding-the-gpu-course"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 (http/https URLs from our own constants)


def _receive(response, part: Path, offset: int, *, url: str, progress: bool) -> None:
    """Write a response body to `part` (appending from `offset` on a 206 reply), or raise IncompleteDownloadError."""
    if offset and response.status != 206:  # the server ignored the Range header: start again
        offset = 0
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
    timeout: float = 30.0,
    progress: bool = True,
) -> Path:
    """Download `url` to `dest` through `dest.part` (resumed with an HTTP Range request), verify, then rename.

    A file is only ever at `dest` once it is complete and its digest matches; an interrupted transfer
    raises IncompleteDownloadError and leaves `dest.part` for the next call to resume.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        verify_file(dest, sha256, md5, source="an earlier download")
        return dest
    part = dest.with_name(dest.name + ".part")
    offset = part.stat().st_size if part.exists() else 0
    try:
        response = _open(url, offset, timeout)
    except urllib.error.HTTPError as error:
        if error.code == 416 and offset:  # nothing left to send: the partial file may already be whole
            response = None
        else:
            raise
    if response is not None:
        with response:
            _receive(response, part, offset, url=url, progress=progress)
    problem = _mismatch(part, sha256, md5)
    if problem:
        rejected = dest.with_name(dest.name + ".rejected")
        os.replace(part, rejected)  # never resume onto bytes we know are wrong
        raise _mismatch_error(rejected, *problem, source=url)
    publish(part, dest)
    return dest


def _check_member(member: tarfile.TarInfo, archive: Path) -> None:
    name = member.name
    parts = PurePosixPath(name).parts
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchiveError(f"{archive}: member {name!r} has an absolute path; refusing to extract anything")
    if ".." in parts:
        raise UnsafeArchiveError(f"{archive}: member {name!r} climbs out with '..'; refusing to extract anything")
    if member.issym() or member.islnk():
        raise UnsafeArchiveError(
            f"{archive}: member {name!r} is a link to {member.linkname!r}; refusing to extract anything"
        )
    if not (member.isfile() or member.isdir()):
        raise UnsafeArchiveError(
            f"{archive}: member {name!r} is a device, FIFO or other special file; refusing to extract anything"
        )


def safe_extract(archive: str | os.PathLike, dest: str | os.PathLike) -> list[Path]:
    """Extract a tar archive into `dest` after checking every member; refuse absolute paths, '..', links, devices."""
    archive, dest = Path(archive), Path(dest)
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for member in members:  # check all before writing anything
            _check_member(member, archive)
        dest.mkdir(parents=True, exist_ok=True)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, members=members, filter="data")  # second line of defence
        else:  # Python < 3.11.4 has no extraction filters; the checks above already ran
            tar.extractall(dest, members=members)  # noqa: S202
    return [dest / m.name for m in members if m.isfile()]


def extract_into(archive: str | os.PathLike, parent: Path, top: str) -> Path:
    """Safely extract `archive`, whose contents sit under folder `top`, to `parent/top` in one rename; return it."""
    target = parent / top
    staging = staging_path(target)
    try:
        safe_extract(archive, staging)
        if not (staging / top).is_dir():
            raise UnsafeArchiveError(f"{archive}: expected a top-level folder {top!r}; it is not there")
        publish(staging / top, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
