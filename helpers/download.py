"""Verified, resumable downloads that abandon stalled transfers and refuse files of the wrong kind or size, safe
when several processes fetch the same file at once; the archive extraction of `archives.py`, re-exported.

Copy with: atomic.py (the inter-process lock, one-rename publish), safe_open.py (regular files only, no planted
links followed), tar_scan.py (file kinds) and archives.py (safe extraction; drop the re-export if you copy only this).
Needs: tqdm (the download's progress bar).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from .archives import ExtractLimits, extract_into, safe_extract
from .atomic import file_lock, publish
from .safe_open import check_regular, make_dirs, open_regular
from .tar_scan import BadArchiveError, UnsafeArchiveError, describe_kind, kind_of_head

__all__ = [
    "BadArchiveError",
    "BadResponseError",
    "ChecksumMismatchError",
    "DestinationWriteError",
    "ExtractLimits",
    "IncompleteDownloadError",
    "StallRule",
    "UnsafeArchiveError",
    "describe_kind",
    "download",
    "extract_into",
    "file_digest",
    "file_kind",
    "safe_extract",
    "verify_file",
]

CHUNK_BYTES = 1 << 20
READ_BYTES = 64 << 10  # one read of the response: returns as soon as some bytes arrived, so stalls are seen
MIB = 1 << 20


class ChecksumMismatchError(RuntimeError):
    """A downloaded or existing file does not have the expected digest (`kind_found`: what the file looks like)."""

    kind_found: str | None = None


class IncompleteDownloadError(ConnectionError):
    """The transfer stopped before the whole file arrived; the partial file is kept for resuming."""


class DestinationWriteError(OSError):
    """The download could not be written where it goes (a full disk, a read-only folder); not a network problem."""


class BadResponseError(IncompleteDownloadError):
    """The server's reply was malformed or not the file: a bad Content-Length, a size other than the exact one."""


@dataclass(frozen=True)
class StallRule:
    """Abandon a transfer that averages under `min_bytes_per_s` over any `seconds`-long stretch (curl's
    --speed-limit/--speed-time); the defaults, 1 KiB/s over 60 s, spare the slowest connection still usable."""

    min_bytes_per_s: float = 1024.0
    seconds: float = 60.0


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
    request = urllib.request.Request(url, headers={"User-Agent": "feeding-the-gpu-course"})  # noqa: S310 (as below)
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 (http/https URLs from our own constants)


def _start(url: str, part: Path, timeout: float):
    """Open `url`, resuming `part` with a Range request; return (response or None when `part` is whole, offset).

    A 206 reply is used only when its Content-Range starts exactly where `part` ends; any other reply to a Range
    request (a 200 with the whole body, a 206 for other bytes) starts the file again from byte 0.
    """
    offset = check_regular(part, role="a partial download").st_size if os.path.lexists(part) else 0
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


def _declared_total(response, offset: int, size: int | None, *, url: str) -> int | None:
    """The file's whole size from Content-Length (None when not sent), checked against the exact `size`."""
    length = response.headers.get("Content-Length")
    if length is not None and not (length.strip().isascii() and length.strip().isdigit()):
        raise BadResponseError(f"{url}: the server sent Content-Length {length!r}, not a byte count; try again later")
    total = offset + int(length) if length is not None else None
    if size is not None and total is not None and total != size:
        raise BadResponseError(
            f"{url}: the server announces {total} bytes where the file has exactly {size}; it is sending something "
            "else: try again later, or check the address"
        )
    return total


def _stalled(url: str, part: Path, received: int, rule: StallRule, got: int, elapsed: float) -> Exception:
    return IncompleteDownloadError(
        f"{url}: stalled: {got} bytes in the last {elapsed:.0f} s, under the {rule.min_bytes_per_s:.0f} bytes/s "
        f"a transfer must average over {rule.seconds:.0f} s; the {received} bytes so far are kept at {part} and the "
        "next run resumes them (pass stall=StallRule(...) to allow a slower connection)"
    )


def _copy_body(response, out, bar, *, url: str, part: Path, start: int, size: int | None, rule: StallRule) -> int:
    """Copy the body to `out`, abandoning it when it stalls or passes `size`; return the bytes `part` then holds."""
    received, window_start, window_bytes = start, time.monotonic(), 0
    while block := response.read1(READ_BYTES):  # returns what has arrived, so a trickle is measured as it comes
        if size is not None and received + len(block) > size:
            raise BadResponseError(f"{url}: the server sent more than the file's {size} bytes; it is something else")
        try:
            out.write(block)
            out.flush()  # a full disk shows here, as this error, not later at close
        except OSError as error:
            raise DestinationWriteError(
                error.errno,
                f"{part}: cannot write the download ({error.strerror}); free disk space or download "
                "somewhere else (the bytes so far are kept and resumed)",
                str(part),
            ) from error
        received += len(block)
        window_bytes += len(block)
        bar.update(len(block))
        elapsed = time.monotonic() - window_start
        if elapsed >= rule.seconds:
            if window_bytes < rule.min_bytes_per_s * elapsed:
                raise _stalled(url, part, received, rule, window_bytes, elapsed)
            window_start, window_bytes = time.monotonic(), 0
    return received


def _receive(response, part: Path, offset: int, *, url: str, progress: bool, size: int | None, rule: StallRule) -> None:
    """Write a response body to `part` (appending from `offset`), or raise IncompleteDownloadError."""
    total = _declared_total(response, offset, size, url=url)
    received = offset
    with (
        open_regular(part, "ab" if offset else "wb", role="a partial download") as out,
        tqdm(total=total, initial=offset, unit="B", unit_scale=True, desc=part.name, disable=not progress) as bar,
    ):
        try:
            received = _copy_body(response, out, bar, url=url, part=part, start=offset, size=size, rule=rule)
        except (OSError, http.client.HTTPException) as error:  # IncompleteRead, a cut chunked body, timeouts
            if isinstance(error, (IncompleteDownloadError, DestinationWriteError)):
                raise
            received = out.tell()
            raise IncompleteDownloadError(
                f"{url}: transfer broke off after {received} bytes ({type(error).__name__}: {error}); the partial "
                f"file is kept at {part} and the next run resumes it"
            ) from error
    want = total if total is not None else size
    if want is not None and received < want:
        raise IncompleteDownloadError(
            f"{url}: transfer stopped after {received} of {want} bytes; the partial file is kept at "
            f"{part} and the next run resumes it"
        )


def _say_waiting(dest: Path) -> Callable[[Path], None]:
    def say(lock: Path) -> None:
        tqdm.write(f"waiting for another process's download of {dest} (it holds {lock})", file=sys.stderr)

    return say


def download(
    url: str,
    dest: str | os.PathLike,
    *,
    sha256: str | None = None,
    md5: str | None = None,
    kind: str | None = None,
    size: int | None = None,
    insecure: bool = False,
    timeout: float = 30.0,
    stall: StallRule = StallRule(),  # a frozen dataclass: one shared default is safe
    progress: bool = True,
) -> Path:
    """Download `url` to `dest` through `dest.part` (resumed with an HTTP Range request), verify, then rename.

    A digest (`sha256` or `md5`) is required; only tests pass `insecure=True` to skip it. With `kind` (a `file_kind`
    result such as "gzip"), a file of another kind (an HTML error page) is refused and named as such; with `size`,
    a file of any other byte count. A transfer slower than the `stall` rule, or silent for `timeout` seconds, is
    abandoned. A file is only ever at `dest` once complete and verified; an interrupted transfer raises
    IncompleteDownloadError (BadResponseError for a malformed reply) and leaves `dest.part` for the next call to
    resume. Processes downloading the same `dest` take turns (a lock beside it); a waiting one says so on stderr.
    """
    if _expected(sha256, md5) is None and not insecure:
        raise ValueError(
            f"download({url!r}): pass sha256= or md5= (the digest published with the file); an unverified "
            "download could be anything. insecure=True skips the check and is meant for tests only"
        )
    dest = Path(dest)
    make_dirs(dest.parent)
    with file_lock(dest, on_wait=_say_waiting(dest)):  # one transfer at a time; the others find the verified file
        if os.path.lexists(dest):
            verify_file(dest, sha256=sha256, md5=md5, source="an earlier download", kind=kind)
            if kind is not None and file_kind(dest) != kind:
                found = describe_kind(file_kind(dest))
                raise BadArchiveError(f"{dest}: is {found}, not {describe_kind(kind)}; delete it and run again")
            return dest
        part = dest.with_name(dest.name + ".part")
        try:
            response, offset = _start(url, part, min(timeout, stall.seconds))
        except http.client.HTTPException as error:  # a garbled status line or headers
            raise BadResponseError(
                f"{url}: the server's reply is malformed ({type(error).__name__}: {error})"
            ) from error
        if response is not None:
            with response:
                try:
                    _receive(response, part, offset, url=url, progress=progress, size=size, rule=stall)
                except BadResponseError:
                    if os.path.lexists(part):  # never resume onto bytes of something else
                        os.replace(part, dest.with_name(dest.name + ".rejected"))
                    raise
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
    assert kind is not None and found is not None  # no kind asked: found is None too, and it returned above
    raise BadArchiveError(
        f"{url} sent {describe_kind(found)}, not {describe_kind(kind)}; it is kept as {rejected}. "
        "Delete it and run again later, or check the address."
    )
