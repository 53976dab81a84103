"""Verified, resumable downloads that abandon stalled transfers and refuse files of the wrong kind or size, safe
when several processes fetch the same file at once; the archive extraction of `archives.py`, re-exported. Every
transfer is bounded (its head by `timeout`, its body by a deadline, a byte cap and a stall rule, all enforced by
shutting the socket); every failure is one of this module's errors, naming the URL and what to do.

Example:
    >>> import tempfile
    >>> empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # the sha256 of no bytes
    >>> with tempfile.TemporaryDirectory() as tmp:  # a verified file already at `dest` is used: nothing is fetched
    ...     (Path(tmp) / "a.txt").touch()
    ...     print(download("https://example.org/a.txt", Path(tmp) / "a.txt", sha256=empty).name)
    a.txt

Copy with: atomic.py (lock, one-rename publish), safe_open.py (regular files), tar_scan.py and archives.py (digests).
Needs: tqdm (the download's progress bar).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from .archives import (
    ChecksumMismatchError,
    ExtractLimits,
    extract_into,
    file_digest,
    file_kind,
    is_verified,
    mismatch,
    mismatch_error,
    safe_extract,
    verify_file,
)
from .atomic import DestinationError, file_lock, publish, sibling_path
from .safe_open import check_regular, open_regular
from .tar_scan import BadArchiveError, UnsafeArchiveError, describe_kind, kind_of_head

# fmt: off
__all__ = [
    "BadArchiveError", "BadResponseError", "ChecksumMismatchError", "DestinationError", "DestinationWriteError",
    "ExtractLimits", "IncompleteDownloadError", "ServerError", "StallRule", "UnreachableError", "UnsafeArchiveError",
    "describe_kind", "download", "extract_into", "file_digest", "file_kind", "safe_extract", "transfer_deadline",
    "verify_file",
]
# fmt: on

READ_BYTES = 64 << 10  # one read of the response: returns as soon as some bytes arrived, so stalls are seen
MAX_BYTES = 4 << 30  # the cap on a download of unknown size: past any dataset archive this code fetches
DEADLINE_BASE_S = 300.0  # the overall deadline: this much, plus the expected bytes at DEADLINE_BYTES_PER_S
DEADLINE_BYTES_PER_S = 64 << 10  # 64 KiB/s: CIFAR-10's 170 MB get 48 min, where the stall rule alone allows 46 h
HEAD_BYTES = 512  # the first bytes, that tell a file's kind


class IncompleteDownloadError(ConnectionError):
    """The transfer stopped before the whole file arrived (cut, stalled, past its deadline); the part is kept."""


class UnreachableError(IncompleteDownloadError):
    """No reply came: the connection was refused, the name did not resolve, or the server stayed silent."""


class DestinationWriteError(DestinationError):
    """The download could not be written where it goes (a full disk, a read-only folder); not a network problem."""


class BadResponseError(IncompleteDownloadError):
    """The server's reply was malformed or not the file: a bad Content-Length, past the exact size or the cap."""


class ServerError(BadResponseError):
    """The server answered an error status (404, 500 ...) or a bad redirect (a loop, file://); `code`: the status."""

    code: int = 0


@dataclass(frozen=True)
class StallRule:
    """Abandon a transfer that averages under `min_bytes_per_s` over any `seconds`-long stretch (curl's
    --speed-limit/--speed-time); the defaults, 1 KiB/s over 60 s, spare the slowest connection still usable."""

    min_bytes_per_s: float = 1024.0
    seconds: float = 60.0


def transfer_deadline(expected_bytes: int) -> float:
    """Seconds a transfer of `expected_bytes` may take in all: DEADLINE_BASE_S plus the bytes at 64 KiB/s."""
    return DEADLINE_BASE_S + expected_bytes / DEADLINE_BYTES_PER_S


class _Watch:
    """Shuts the sockets of one download when the time it was armed for runs out, so that no read outlives it: a
    status line or headers trickled a byte at a time, an endless run of 100 Continue, a body read left waiting."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        self.passed, self._timer = False, threading.Timer(0, lambda: None)

    def arm(self, seconds: float | None) -> None:
        self._timer.cancel()
        if seconds is not None:
            self._timer = threading.Timer(seconds, self._expire)
            self._timer.daemon = True
            self._timer.start()

    def _expire(self) -> None:
        self.passed = True
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the file descriptor itself, TLS or not


class _HttpRedirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects to http(s) addresses only (it follows one to ftp:// too)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201 (urllib's signature)
        if not newurl.lower().startswith(("http://", "https://")):  # the same error urllib gives for file://
            raise urllib.error.HTTPError(newurl, code, f"{msg} - a redirect to {newurl!r}", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener(watch: _Watch) -> urllib.request.OpenerDirector:
    """urllib's opener, its connections' sockets given to `watch` and its redirects to http(s) only."""

    def watched(base: type) -> Any:  # a connection class, as do_open takes one
        class Watched(base):
            def connect(self) -> None:
                super().connect()
                watch.sockets.append(self.sock)

        return Watched

    plain, secure = watched(http.client.HTTPConnection), watched(http.client.HTTPSConnection)

    class Handler(urllib.request.HTTPHandler, urllib.request.HTTPSHandler):  # replaces both of urllib's
        def http_open(self, req):  # noqa: ANN001, ANN201 (urllib's signature)
            return self.do_open(plain, req)

        def https_open(self, req):  # noqa: ANN001, ANN201 (urllib's signature)
            return self.do_open(secure, req, context=self._context)  # type: ignore[attr-defined]

    return urllib.request.build_opener(Handler(), _HttpRedirects())


def _server_error(url: str, error: urllib.error.HTTPError) -> ServerError:
    why = "a redirect loop, or one to a non-http(s) address (never followed); " if 300 <= error.code < 400 else ""
    advice = "try again later" if error.code >= 500 else "check the address"
    reason = " ".join(str(error.reason).split())  # urllib's redirect-loop reason spans lines
    server_error = ServerError(f"{url}: the server answered {error.code} {reason}; {why}{advice}")
    server_error.code = error.code
    return server_error


def _open(url: str, offset: int, timeout: float, watch: _Watch):
    """The response to a GET of `url` from `offset`, its head within `timeout` s in all (redirects included)."""
    request = urllib.request.Request(url, headers={"User-Agent": "feeding-the-gpu-course"})  # noqa: S310 (as below)
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    watch.arm(timeout)
    try:
        response = _opener(watch).open(request, timeout=timeout)  # http/https only: checked, and so are redirects
        if watch.passed:  # the head was cut by the watch (http.client takes a cut as the end of the headers)
            raise TimeoutError("the reply was cut at the timeout")
        return response
    except urllib.error.HTTPError as error:
        raise _server_error(url, error) from error
    except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
        reason = getattr(error, "reason", error)
        if isinstance(error, http.client.HTTPException) and not watch.passed:  # a garbled status line or headers
            raise BadResponseError(f"{url}: the reply is malformed ({type(error).__name__}: {error})") from error
        # refused, no such host, silent, or a head that never ended (a trickle, endless 100 Continue ...)
        why = "its status line and headers did not end" if watch.passed else f"{type(reason).__name__}: {reason}"
        raise UnreachableError(
            f"{url}: no reply ({why}; waited at most {timeout:.0f} s in all); check the address and the network, or "
            "try again later"
        ) from error
    finally:
        watch.arm(None)


def _start(url: str, part: Path, timeout: float, watch: _Watch):
    """Open `url`, resuming `part` with a Range request; return (response or None when `part` is whole, offset).

    A 206 reply is used only when its Content-Range starts exactly where `part` ends; any other reply to a Range
    request (a 200 with the whole body, a 206 for other bytes) starts the file again from byte 0.
    """
    offset = check_regular(part, role="a partial download").st_size if os.path.lexists(part) else 0
    try:
        response = _open(url, offset, timeout, watch)
    except ServerError as error:
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
    return _open(url, 0, timeout, watch), 0


def _declared_total(response, offset: int, size: int | None, cap: int, *, url: str) -> int | None:
    """The file's whole size from Content-Length (None when not sent), checked against the exact `size` or the cap."""
    length = response.headers.get("Content-Length")
    if length is not None and not (length.strip().isascii() and length.strip().isdigit()):
        raise BadResponseError(f"{url}: the server sent Content-Length {length!r}, not a byte count; try again later")
    total = offset + int(length) if length is not None else None
    if size is not None and total is not None and total != size:
        raise BadResponseError(
            f"{url}: the server announces {total} bytes where the file has exactly {size}; it is sending something "
            "else: try again later, or check the address"
        )
    if total is not None and total > cap:
        raise BadResponseError(f"{url}: the server announces {total} bytes, past the {cap} allowed (max_bytes=)")
    return total


@dataclass(frozen=True)
class _Bounds:
    """What one transfer may do: the exact size, the byte cap, the deadline (s), the kind of its first bytes."""

    size: int | None
    cap: int
    deadline: float | None
    kind: str | None
    rule: StallRule
    watch: _Watch


class _WrongKind(Exception):
    """The first bytes are of another kind than asked: stop reading; the checks after the transfer name it."""


def _copy_body(response, out, bar, *, url: str, part: Path, start: int, bounds: _Bounds) -> int:
    """Copy the body to `out`, abandoning it when it stalls, passes the cap or starts with bytes of another kind
    (bounds.watch ends it at the deadline); return the bytes `part` then holds."""
    received, window_start, window_bytes = start, time.monotonic(), 0
    head = b"" if start == 0 and bounds.kind is not None else None
    while block := response.read1(READ_BYTES):  # returns what has arrived, so a trickle is measured as it comes
        if received + len(block) > bounds.cap:
            allowed = f"the file's {bounds.size}" if bounds.size is not None else f"the {bounds.cap} allowed"
            raise BadResponseError(f"{url}: the server sent more than {allowed} bytes; it is something else")
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
        if head is not None and len(head) < HEAD_BYTES:
            head += block[: HEAD_BYTES - len(head)]
            if len(head) == HEAD_BYTES and kind_of_head(head) != bounds.kind:
                raise _WrongKind
        now = time.monotonic()
        if now - window_start >= bounds.rule.seconds:
            rule, elapsed = bounds.rule, now - window_start
            if window_bytes < rule.min_bytes_per_s * elapsed:
                raise IncompleteDownloadError(
                    f"{url}: stalled: {window_bytes} bytes in the last {elapsed:.0f} s, under the "
                    f"{rule.min_bytes_per_s:.0f} bytes/s a transfer must average over {rule.seconds:.0f} s; the "
                    f"{received} bytes so far are kept at {part} and the next run resumes them (pass "
                    "stall=StallRule(...) to allow a slower connection)"
                )
            window_start, window_bytes = now, 0
    return received


def _receive(response, part: Path, offset: int, *, url: str, progress: bool, bounds: _Bounds) -> None:
    """Write a response body to `part` (appending from `offset`) within the deadline, else IncompleteDownloadError."""
    total = _declared_total(response, offset, bounds.size, bounds.cap, url=url)
    expected = total if total is not None else bounds.size if bounds.size is not None else bounds.cap
    deadline = bounds.deadline if bounds.deadline is not None else transfer_deadline(expected - offset)
    received, began = offset, time.monotonic()
    with (
        open_regular(part, "ab" if offset else "wb", role="a partial download") as out,
        tqdm(total=total, initial=offset, unit="B", unit_scale=True, desc=part.name, disable=not progress) as bar,
    ):
        bounds.watch.arm(deadline)  # a read still waiting then is cut: the deadline holds to the moment
        try:
            received = _copy_body(response, out, bar, url=url, part=part, start=offset, bounds=bounds)
        except (OSError, http.client.HTTPException) as error:  # IncompleteRead, a cut chunked body, timeouts
            if isinstance(error, (IncompleteDownloadError, DestinationWriteError)):
                raise
            received = out.tell()
            if not bounds.watch.passed:
                raise IncompleteDownloadError(
                    f"{url}: transfer broke off after {received} bytes ({type(error).__name__}: {error}); the "
                    f"partial file is kept at {part} and the next run resumes it"
                ) from error
        finally:
            bounds.watch.arm(None)
    if bounds.watch.passed:
        raise IncompleteDownloadError(
            f"{url}: not done within its deadline of {deadline:.0f} s ({received - offset} bytes in "
            f"{time.monotonic() - began:.0f} s); the {received} bytes so far are kept at {part} and the next run "
            "resumes them (pass deadline= to allow longer)"
        )
    want = total if total is not None else bounds.size
    if want is not None and received < want:
        raise IncompleteDownloadError(
            f"{url}: transfer stopped after {received} of {want} bytes; the partial file is kept at "
            f"{part} and the next run resumes it"
        )


def download(
    url: str,
    dest: str | os.PathLike,
    *,
    sha256: str | None = None,
    md5: str | None = None,
    kind: str | None = None,
    size: int | None = None,
    max_bytes: int | None = None,
    deadline: float | None = None,
    insecure: bool = False,
    timeout: float = 30.0,
    stall: StallRule = StallRule(),  # a frozen dataclass: one shared default is safe
    progress: bool = True,
) -> Path:
    """Download `url` to `dest` through `dest.part` (resumed with an HTTP Range request), verify, then rename.

    A digest (`sha256` or `md5`) is required; only tests pass `insecure=True` to skip it. With `kind` (a `file_kind`
    result such as "gzip"), a file of another kind (an HTML error page) is refused from its first bytes and named;
    with `size`, a file of any other byte count; without, one past `max_bytes` (4 GiB unless given). A transfer
    whose status line and headers take over `timeout` s in all, slower than `stall` or not done within `deadline` s
    (default: transfer_deadline of the expected bytes) is abandoned, a read still waiting then included. A file is
    only ever at `dest` once complete and verified; a cut transfer raises IncompleteDownloadError (BadResponseError:
    a malformed reply; ServerError: an error status, a bad redirect; UnreachableError: no reply) and leaves
    `dest.part` for the next call to resume. A verified `dest` is used without the lock (so in a read-only folder); a
    folder that cannot be written is atomic.DestinationError naming it. Processes fetching one `dest` take turns."""
    if not (sha256 or md5 or insecure):
        raise ValueError(
            f"download({url!r}): pass sha256= or md5= (the digest published with the file); an unverified "
            "download could be anything. insecure=True skips the check and is meant for tests only"
        )
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"download({url!r}): only http:// and https:// addresses are fetched")
    dest = Path(dest)
    if is_verified(dest, sha256=sha256, md5=md5, kind=kind):  # before the lock: it may sit in a read-only folder
        return dest
    cap = size if size is not None else max_bytes if max_bytes is not None else MAX_BYTES
    bounds = _Bounds(size, cap, deadline, kind, stall, _Watch())
    say = f"waiting for another process's download of {dest} (it holds %s)"  # one transfer at a time; the others
    with file_lock(dest, on_wait=lambda lock: tqdm.write(say % lock, file=sys.stderr)):  # find the verified file
        if is_verified(dest, sha256=sha256, md5=md5, kind=kind):
            return dest
        part = sibling_path(dest, "part")
        response, offset = _start(url, part, min(timeout, stall.seconds), bounds.watch)
        if response is not None:
            with response:
                try:
                    _receive(response, part, offset, url=url, progress=progress, bounds=bounds)
                except _WrongKind:
                    pass  # the checks below name what came and set it aside
                except BadResponseError:
                    if os.path.lexists(part):  # never resume onto bytes of something else
                        os.replace(part, sibling_path(dest, "rejected"))
                    raise
        _check_download(part, dest, url=url, sha256=sha256, md5=md5, kind=kind)
        publish(part, dest)
    return dest


def _check_download(part: Path, dest: Path, *, url: str, sha256: str | None, md5: str | None, kind: str | None) -> None:
    """Set a finished transfer aside as `dest.rejected` and raise when its digest or kind is wrong."""
    problem = mismatch(part, sha256, md5)
    found = file_kind(part) if kind is not None else None
    if problem is None and found == kind:
        return
    rejected = sibling_path(dest, "rejected")
    os.replace(part, rejected)  # never resume onto bytes we know are wrong
    if problem:
        raise mismatch_error(rejected, *problem, source=url, kind=kind)
    assert kind is not None and found is not None  # no kind asked: found is None too, and it returned above
    raise BadArchiveError(
        f"{url} sent {describe_kind(found)}, not {describe_kind(kind)}; it is kept as {rejected}. "
        "Delete it and run again later, or check the address."
    )
