"""The download code against a loopback HTTP server: good archive, wrong checksum, cut-short transfer, resume, broken
range replies, HTML error pages, a digest required, and several processes fetching the same file at once."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from helpers import download as download_module
from helpers.atomic import NAME_MAX, file_lock, sibling_path
from helpers.course import data
from helpers.course.data import BSDS300_SHA256_ENV_VAR, DatasetLayoutError, prepare_bsds300, prepare_cifar10
from helpers.download import (
    BadArchiveError,
    BadResponseError,
    ChecksumMismatchError,
    IncompleteDownloadError,
    ServerError,
    StallRule,
    UnreachableError,
    download,
    transfer_deadline,
    verify_file,
)
from helpers.safe_open import NotRegularFileError

from .conftest import jpeg_bytes, tar_bytes

ROOT = Path(__file__).resolve().parents[1]
HTML_PAGE = b"<!DOCTYPE html>\n<html><head><title>503</title></head><body>Service unavailable</body></html>\n"

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_good_download_is_verified_and_renamed(http_server, tmp_path):
    http_server.files["/file.bin"] = PAYLOAD
    dest = download(http_server.url("/file.bin"), tmp_path / "file.bin", sha256=sha256(PAYLOAD), progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert not (tmp_path / "file.bin.part").exists()
    # A second call finds the verified file and asks the server nothing.
    requests = len(http_server.requests)
    download(http_server.url("/file.bin"), dest, sha256=sha256(PAYLOAD), progress=False)
    assert len(http_server.requests) == requests


def test_md5_is_checked_too(http_server, tmp_path):
    http_server.files["/file.bin"] = PAYLOAD
    md5 = hashlib.md5(PAYLOAD).hexdigest()
    assert download(http_server.url("/file.bin"), tmp_path / "f", md5=md5, progress=False).exists()
    with pytest.raises(ChecksumMismatchError, match="MD5"):
        download(http_server.url("/file.bin"), tmp_path / "g", md5="0" * 32, progress=False)


def test_wrong_checksum_is_a_clear_error_and_never_a_valid_file(http_server, tmp_path):
    http_server.files["/file.bin"] = PAYLOAD
    dest = tmp_path / "file.bin"
    with pytest.raises(ChecksumMismatchError) as info:
        download(http_server.url("/file.bin"), dest, sha256="0" * 64, progress=False)
    message = str(info.value)
    assert sha256(PAYLOAD) in message and "0" * 64 in message  # what it got and what it expected
    assert "Delete" in message and "run again" in message  # and what to do
    assert "only after checking where it came from" in message  # a new digest is not trusted blindly
    assert not dest.exists() and not (tmp_path / "file.bin.part").exists()
    assert (tmp_path / "file.bin.rejected").read_bytes() == PAYLOAD  # kept, so nothing is lost


def test_cut_short_transfer_keeps_the_part_and_resumes(http_server, tmp_path):
    http_server.files["/file.bin"] = PAYLOAD
    http_server.cut_after["/file.bin"] = 300_000
    dest = tmp_path / "file.bin"
    with pytest.raises(IncompleteDownloadError, match="resumes"):
        download(http_server.url("/file.bin"), dest, sha256=sha256(PAYLOAD), progress=False)
    assert not dest.exists()
    part = tmp_path / "file.bin.part"
    assert part.stat().st_size == 300_000
    download(http_server.url("/file.bin"), dest, sha256=sha256(PAYLOAD), progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert http_server.requests[-1] == ("/file.bin", "bytes=300000-")  # only the rest was fetched


def test_a_part_that_is_already_whole_is_finished_without_refetching(http_server, tmp_path):
    http_server.files["/file.bin"] = PAYLOAD
    (tmp_path / "file.bin.part").write_bytes(PAYLOAD)
    dest = download(http_server.url("/file.bin"), tmp_path / "file.bin", sha256=sha256(PAYLOAD), progress=False)
    assert dest.read_bytes() == PAYLOAD


def _bsds_archive(train: int = 200, test: int = 100) -> bytes:
    members = {}
    for split, count in (("train", train), ("test", test)):
        for i in range(count):
            members[f"BSDS300/images/{split}/{i}.jpg"] = jpeg_bytes(8, 6, seed=i)
    members["BSDS300/iids_train.txt"] = b"\n".join(str(i).encode() for i in range(train))
    return tar_bytes(members)


def test_prepare_bsds300_downloads_extracts_and_checks_the_split(http_server, tmp_path):
    archive = _bsds_archive()
    http_server.files["/BSDS300-images.tgz"] = archive
    source = prepare_bsds300(
        tmp_path, offline=False, url=http_server.url("/BSDS300-images.tgz"), sha256=sha256(archive), progress=False
    )
    assert not source.is_standin and source.name == "BSDS300"
    assert len(list((source.root / "images" / "train").glob("*.jpg"))) == 200
    assert len(list((source.root / "images" / "test").glob("*.jpg"))) == 100
    assert "verified" in source.note


def test_prepare_bsds300_refuses_a_short_split(http_server, tmp_path):
    archive = _bsds_archive(train=199)
    http_server.files["/BSDS300-images.tgz"] = archive
    with pytest.raises(DatasetLayoutError, match="199 images, expected 200"):
        prepare_bsds300(
            tmp_path, offline=False, url=http_server.url("/BSDS300-images.tgz"), sha256=sha256(archive), progress=False
        )


def test_prepare_bsds300_mismatch_says_how_to_proceed(http_server, tmp_path, monkeypatch):
    monkeypatch.delenv(BSDS300_SHA256_ENV_VAR, raising=False)
    http_server.files["/BSDS300-images.tgz"] = _bsds_archive(train=2, test=1)
    with pytest.raises(ChecksumMismatchError) as info:
        prepare_bsds300(tmp_path, offline=False, url=http_server.url("/BSDS300-images.tgz"), progress=False)
    assert BSDS300_SHA256_ENV_VAR in str(info.value) and "COURSE_OFFLINE=1" in str(info.value)
    assert not (tmp_path / "BSDS300").exists()  # the pinned digest did not match: nothing was extracted


def test_no_network_falls_back_to_the_standin_and_says_so(tmp_path):
    # Port 9 on loopback (discard) is closed here: the connection is refused at once, as when offline.
    source = prepare_bsds300(tmp_path, offline=False, url="http://127.0.0.1:9/BSDS300-images.tgz", progress=False)
    assert source.is_standin and "failed" in source.note and "STAND-IN" in source.describe()
    cifar = prepare_cifar10(tmp_path, offline=False, url="http://127.0.0.1:9/cifar.tar.gz", progress=False)
    assert cifar.is_standin and "stand-in" in cifar.name


def test_a_digest_is_required(http_server, tmp_path):
    http_server.files["/file.bin"] = PAYLOAD
    with pytest.raises(ValueError, match="pass sha256= or md5="):
        download(http_server.url("/file.bin"), tmp_path / "file.bin", progress=False)
    assert not http_server.requests and not (tmp_path / "file.bin").exists()
    dest = download(http_server.url("/file.bin"), tmp_path / "file.bin", insecure=True, progress=False)
    assert dest.read_bytes() == PAYLOAD


@pytest.mark.parametrize("claimed_start", [0, 100_000])
def test_a_206_reply_from_another_byte_is_not_appended(http_server, tmp_path, claimed_start):
    # A broken server answers 'Range: bytes=300000-' with a 206 from byte 0 (the whole body) or from elsewhere.
    http_server.files["/file.bin"] = PAYLOAD
    http_server.range_start["/file.bin"] = claimed_start
    (tmp_path / "file.bin.part").write_bytes(PAYLOAD[:300_000])
    dest = download(http_server.url("/file.bin"), tmp_path / "file.bin", sha256=sha256(PAYLOAD), progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert http_server.requests[-1] == ("/file.bin", None)  # it started again with a plain request


def test_an_html_error_page_is_named_as_such(http_server, tmp_path):
    http_server.files["/data.tgz"] = HTML_PAGE
    with pytest.raises(BadArchiveError, match="sent an HTML page.*not a gzip-compressed file") as info:
        download(http_server.url("/data.tgz"), tmp_path / "data.tgz", kind="gzip", insecure=True, progress=False)
    assert "data.tgz.rejected" in str(info.value) and not (tmp_path / "data.tgz").exists()
    with pytest.raises(ChecksumMismatchError, match="It is an HTML page") as info:
        download(http_server.url("/data.tgz"), tmp_path / "data.tgz", sha256="0" * 64, kind="gzip", progress=False)
    assert "digest means nothing" in str(info.value)  # never: 'trust the new digest'


def test_prepare_bsds300_names_an_html_page_whose_digest_was_trusted(http_server, tmp_path):
    # The old message suggested trusting a mismatching digest; for an HTML page that stored it as the archive and
    # every later run failed in tarfile. The page is now refused as what it is, whatever digest is given.
    http_server.files["/BSDS300-images.tgz"] = HTML_PAGE
    with pytest.raises(BadArchiveError, match="HTML page"):
        prepare_bsds300(
            tmp_path,
            offline=False,
            url=http_server.url("/BSDS300-images.tgz"),
            sha256=sha256(HTML_PAGE),
            progress=False,
        )
    assert not (tmp_path / "BSDS300").exists() and not (tmp_path / "BSDS300-images.tgz").exists()
    (tmp_path / "BSDS300-images.tgz").write_bytes(HTML_PAGE)  # stored by an older version that trusted its digest
    with pytest.raises(BadArchiveError, match=r"BSDS300-images.tgz: is an HTML page.*delete it and run again"):
        prepare_bsds300(
            tmp_path,
            offline=False,
            url=http_server.url("/BSDS300-images.tgz"),
            sha256=sha256(HTML_PAGE),
            progress=False,
        )


def test_prepare_bsds300_mismatch_with_an_html_page_does_not_offer_its_digest(http_server, tmp_path, monkeypatch):
    monkeypatch.delenv(BSDS300_SHA256_ENV_VAR, raising=False)
    http_server.files["/BSDS300-images.tgz"] = HTML_PAGE
    with pytest.raises(ChecksumMismatchError) as info:
        prepare_bsds300(tmp_path, offline=False, url=http_server.url("/BSDS300-images.tgz"), progress=False)
    assert "HTML page" in str(info.value) and BSDS300_SHA256_ENV_VAR not in str(info.value)


DOWNLOADER = """
import os, sys, time
from pathlib import Path
from helpers.download import download
dest = Path(sys.argv[2])
(dest.parent / f"ready-{os.getpid()}").touch()
while not (dest.parent / "go").exists():  # start together, so that the transfers overlap
    time.sleep(0.005)
path = download(sys.argv[1], dest, sha256=sys.argv[3], progress=False)
print(len(path.read_bytes()))
"""


def test_processes_downloading_the_same_file_all_succeed(http_server, tmp_path):
    big = np.random.default_rng(0).bytes(12 << 20)  # under 16 MiB: freeing larger buffers changes how
    # glibc serves later 16 MiB allocations, which test_measure relies on
    http_server.files["/big.bin"] = big
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    args = [http_server.url("/big.bin"), str(tmp_path / "big.bin"), sha256(big)]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", DOWNLOADER, *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("ready-*"))) < len(processes) and time.monotonic() < deadline:
        time.sleep(0.01)
    (tmp_path / "go").touch()
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0 and out.strip() == str(len(big)), err[-2000:]
    assert (tmp_path / "big.bin").read_bytes() == big
    assert len(http_server.requests) == 1  # one transfer; the others waited and found the verified file
    assert not list(tmp_path.glob("big.bin.*[!k]"))  # no .part or .rejected left


# --- stalled, oversized and malformed transfers; special files and planted links; a waiting process says so --------


@contextlib.contextmanager
def _serve(respond):
    """A loopback server whose every GET is answered by `respond(handler)`; yields the URL of /file."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            try:
                respond(self)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up, as it should
                pass
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/file"
    finally:
        server.shutdown()
        server.server_close()


def _headers(handler, **headers) -> None:
    handler.send_response(200)
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.end_headers()


def _trickle(handler) -> None:
    _headers(handler, Content_Length="100000")
    for _ in range(200):  # 10 bytes every 0.1 s: never silent for a whole timeout, yet hopelessly slow
        handler.wfile.write(b"x" * 10)
        handler.wfile.flush()
        time.sleep(0.1)


@pytest.mark.timeout(60)
def test_a_trickling_transfer_is_abandoned_by_the_stall_rule(tmp_path):
    rule = StallRule(min_bytes_per_s=1000, seconds=1.0)
    with _serve(_trickle) as url, pytest.raises(IncompleteDownloadError, match="stalled: .* under the 1000 bytes/s"):
        download(url, tmp_path / "f", insecure=True, timeout=3, stall=rule, progress=False)
    assert 0 < (tmp_path / "f.part").stat().st_size < 1000 and not (tmp_path / "f").exists()  # kept for resuming


def test_the_default_stall_rule_spares_a_slow_connection():
    assert StallRule().min_bytes_per_s <= 1024 and StallRule().seconds >= 60


def _endless(handler) -> None:  # no Content-Length: the body ends when the server hangs up, which it never would
    _headers(handler, Connection="close")
    for _ in range(64):
        handler.wfile.write(bytes(64 << 10))


@pytest.mark.timeout(60)
def test_an_exact_size_stops_a_body_that_goes_on(tmp_path):
    with _serve(_endless) as url, pytest.raises(BadResponseError, match="more than the file's 100000 bytes"):
        download(url, tmp_path / "f", insecure=True, size=100_000, progress=False)
    assert not (tmp_path / "f").exists() and not (tmp_path / "f.part").exists()
    assert (tmp_path / "f.rejected").stat().st_size <= 100_000  # set aside, never resumed onto


def test_an_exact_size_refuses_a_reply_that_announces_another(http_server, tmp_path):
    http_server.files["/file.bin"] = PAYLOAD
    with pytest.raises(BadResponseError, match=f"announces {len(PAYLOAD)} bytes where the file has exactly 1000"):
        download(http_server.url("/file.bin"), tmp_path / "f", insecure=True, size=1000, progress=False)


def _bad_length(handler) -> None:
    _headers(handler, Content_Length="12abc")
    handler.wfile.write(b"hello world!")


def _cut_chunked(handler) -> None:
    _headers(handler, Transfer_Encoding="chunked")
    handler.wfile.write(b"400\r\n" + b"x" * 100)  # a 1024-byte chunk announced, 100 bytes sent, then hang up
    handler.wfile.flush()


def _garbage_status(handler) -> None:
    handler.wfile.write(b"HELLO THERE\r\n\r\n")  # not an HTTP status line


@pytest.mark.parametrize(
    ("respond", "error", "match"),
    [
        (_bad_length, BadResponseError, "Content-Length '12abc', not a byte count"),
        (_cut_chunked, IncompleteDownloadError, "broke off after .*IncompleteRead"),
        (_garbage_status, BadResponseError, "reply is malformed \\(BadStatusLine"),
    ],
)
def test_malformed_and_cut_replies_are_download_errors(tmp_path, respond, error, match):
    with _serve(respond) as url, pytest.raises(error, match=match):
        download(url, tmp_path / "f", insecure=True, progress=False)
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize("respond", [_bad_length, _cut_chunked, _garbage_status])
def test_the_course_falls_back_to_its_standin_on_a_malformed_reply(tmp_path, respond):
    with _serve(respond) as url:
        source = prepare_bsds300(tmp_path, offline=False, url=url, progress=False)
    assert source.is_standin and "failed" in source.note


@pytest.mark.timeout(60)
def test_a_fifo_for_a_destination_or_its_part_is_named(http_server, tmp_path):
    http_server.files["/file.bin"] = PAYLOAD
    os.mkfifo(tmp_path / "a.bin")
    with pytest.raises(NotRegularFileError, match=r"a.bin: is a FIFO"):
        download(http_server.url("/file.bin"), tmp_path / "a.bin", sha256=sha256(PAYLOAD), progress=False)
    os.mkfifo(tmp_path / "b.bin.part")
    with pytest.raises(NotRegularFileError, match=r"b.bin.part: is a FIFO"):
        download(http_server.url("/file.bin"), tmp_path / "b.bin", sha256=sha256(PAYLOAD), progress=False)


def test_a_planted_link_at_the_part_name_is_not_followed(http_server, tmp_path):
    http_server.files["/file.bin"] = PAYLOAD
    victim = tmp_path / "someone-elses.txt"
    victim.write_bytes(b"precious")
    (tmp_path / "f.bin.part").symlink_to(victim)
    with pytest.raises(NotRegularFileError, match="f.bin.part: is a symbolic link"):
        download(http_server.url("/file.bin"), tmp_path / "f.bin", sha256=sha256(PAYLOAD), progress=False)
    assert victim.read_bytes() == b"precious"


@pytest.mark.timeout(120)
def test_a_process_waiting_for_another_download_says_so(http_server, tmp_path):
    http_server.files["/file.bin"] = PAYLOAD
    dest = tmp_path / "file.bin"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    code = "import sys; from helpers.download import download; download(sys.argv[1], sys.argv[2], sha256=sys.argv[3])"
    with file_lock(dest):  # another process's download in progress
        waiter = subprocess.Popen(
            [sys.executable, "-c", code, http_server.url("/file.bin"), str(dest), sha256(PAYLOAD)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines = [waiter.stderr.readline()]
        while lines[-1] and "waiting for" not in lines[-1]:  # skip any warning an import printed first
            lines.append(waiter.stderr.readline())
        assert f"waiting for another process's download of {dest}" in lines[-1], lines
        assert waiter.poll() is None  # still waiting while the lock is held
    _, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, err[-2000:]
    assert dest.read_bytes() == PAYLOAD


FULL_DISK_DOWNLOAD = """
import sys
from helpers.download import DestinationWriteError, download
try:
    download(sys.argv[1], sys.argv[2], insecure=True, progress=False)
except DestinationWriteError as error:
    print("DestinationWriteError:", error)
"""


def test_a_full_disk_is_named_as_such_not_as_a_broken_transfer(http_server, tmp_path):
    # A 1 MiB tmpfs in a private mount namespace (root on Linux only); the file is 3 MiB. Loopback still reaches.
    small = tmp_path / "small"
    small.mkdir()
    unshare, mount = shutil.which("unshare"), f"mount -t tmpfs -o size=1m tmpfs {small}"
    if unshare is None or subprocess.run([unshare, "--mount", "sh", "-c", mount], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root and unshare)")
    http_server.files["/big.bin"] = PAYLOAD * 3
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    script = f'{mount} && exec "$0" -c "$1" "$2" "$3"'
    result = subprocess.run(
        [
            unshare,
            "--mount",
            "sh",
            "-c",
            script,
            sys.executable,
            FULL_DISK_DOWNLOAD,
            http_server.url("/big.bin"),
            str(small / "big.bin"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "DestinationWriteError:" in result.stdout, result.stdout + result.stderr[-2000:]
    assert "big.bin.part: cannot write the download (No space left on device)" in result.stdout


UNREACHABLE = "http://127.0.0.1:9/never-asked"  # a file at dest is verified before any transfer


def _last_char_changed(digest: str) -> str:
    return digest[:-1] + ("0" if digest[-1] != "0" else "1")


class TestDigests:
    """A file's digest must match the expected one in full (a shared prefix is not a match) and in any letter case; a
    file already at `dest` is checked so before anything is fetched."""

    @pytest.mark.parametrize("algorithm", ["sha256", "md5"])
    def test_a_digest_that_differs_only_at_its_end_is_a_mismatch(self, tmp_path, algorithm):
        dest = tmp_path / "data.bin"
        dest.write_bytes(b"the published bytes")
        right = hashlib.new(algorithm, dest.read_bytes()).hexdigest()
        verify_file(dest, **{algorithm: right})
        with pytest.raises(ChecksumMismatchError, match=str(dest)):
            verify_file(dest, **{algorithm: _last_char_changed(right)})
        with pytest.raises(ChecksumMismatchError, match=str(dest)):
            download(UNREACHABLE, dest, progress=False, **{algorithm: _last_char_changed(right)})
        with pytest.raises(ChecksumMismatchError):
            verify_file(dest, **{algorithm: right[: len(right) // 2]})  # a prefix of the digest is not the digest

    @pytest.mark.parametrize("algorithm", ["sha256", "md5"])
    def test_a_digest_in_capitals_is_the_same_digest(self, tmp_path, algorithm):
        dest = tmp_path / "data.bin"
        dest.write_bytes(b"the published bytes")
        right = hashlib.new(algorithm, dest.read_bytes()).hexdigest().upper()
        verify_file(dest, **{algorithm: right})
        assert download(UNREACHABLE, dest, progress=False, **{algorithm: right}) == dest


@contextlib.contextmanager
def _server(respond: Callable[[socket.socket], None]) -> Iterator[str]:
    """A loopback server that answers every request with `respond(connection)`; yields its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve(connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):
            connection.recv(65536)
            respond(connection)

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                threading.Thread(target=serve, args=(listener.accept()[0],), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/f.tgz"
    finally:
        stop.set()
        listener.close()


def _trickled_headers(connection: socket.socket) -> None:
    connection.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    for _ in range(200):  # one byte every 0.2 s: no socket timeout ever fires
        connection.sendall(b"y")
        time.sleep(0.2)


def _endless_continue(connection: socket.socket) -> None:
    for _ in range(2000):
        connection.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        time.sleep(0.02)


class TestSlowHeadsAndRedirects:
    """A download ends in bounded time however the server misbehaves before or inside the body: a status line or headers
    trickled a byte at a time (under every socket timeout), an endless run of 100 Continue and a redirect to such a
    server are cut when the reply's head has had `timeout` s in all; a body read left waiting is cut at the deadline
    itself, not one socket timeout later; a redirect to ftp:// is refused like one to file://."""

    @pytest.mark.timeout(60)
    @pytest.mark.parametrize(
        "respond", [_trickled_headers, _endless_continue], ids=["trickled-headers", "100-continue"]
    )
    def test_a_reply_whose_head_never_ends_is_cut_at_the_timeout(self, tmp_path, respond):
        with _server(respond) as url:
            start = time.monotonic()
            with pytest.raises(UnreachableError, match=f"{url}: no reply \\(its status line and headers did not end"):
                download(url, tmp_path / "f", insecure=True, timeout=1.5, progress=False)
            elapsed = time.monotonic() - start
        assert elapsed < 5, f"{elapsed:.1f} s for a head that had 1.5 s"

    @pytest.mark.timeout(60)
    def test_a_redirect_to_a_server_whose_head_never_ends_is_cut_too(self, tmp_path):
        with _server(_trickled_headers) as slow:
            location = f"HTTP/1.1 302 Found\r\nLocation: {slow}\r\nContent-Length: 0\r\n\r\n".encode()
            with _server(lambda connection: connection.sendall(location)) as url:
                start = time.monotonic()
                with pytest.raises(UnreachableError, match=f"{url}: no reply"):
                    download(url, tmp_path / "f", insecure=True, timeout=1.5, progress=False)
        assert time.monotonic() - start < 5

    @pytest.mark.timeout(60)
    def test_a_body_read_left_waiting_is_cut_at_the_deadline_not_a_timeout_later(self, tmp_path):
        def silent_body(connection: socket.socket) -> None:
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"x" * 1000)
            time.sleep(30)

        with _server(silent_body) as url:
            start = time.monotonic()
            with pytest.raises(IncompleteDownloadError, match="not done within its deadline of 2 s \\(1000 bytes"):
                download(url, tmp_path / "f", insecure=True, timeout=20, deadline=2, progress=False)
        assert time.monotonic() - start < 6  # the socket timeout alone would have waited 20 s
        assert (tmp_path / "f.part").stat().st_size == 1000  # kept, to resume

    def test_a_redirect_to_ftp_is_refused_and_never_followed(self, tmp_path):
        ftp = socket.socket()
        ftp.bind(("127.0.0.1", 0))
        ftp.listen(1)
        ftp.settimeout(0.5)
        target = f"ftp://127.0.0.1:{ftp.getsockname()[1]}/f.tgz"
        location = f"HTTP/1.1 302 Found\r\nLocation: {target}\r\nContent-Length: 0\r\n\r\n".encode()
        with ftp, _server(lambda connection: connection.sendall(location)) as url:
            with pytest.raises(ServerError, match=f"{url}: the server answered 302 .*a redirect to '{target}'"):
                download(url, tmp_path / "f", insecure=True, timeout=3, progress=False)
            with pytest.raises(TimeoutError):
                ftp.accept()  # no connection ever came

    def test_https_goes_through_the_watched_connections_too(self):
        opener = download_module._opener(download_module._Watch())
        handlers = {
            scheme: [type(h).__name__ for h in opener.handle_open.get(scheme, [])] for scheme in ("http", "https")
        }
        assert handlers == {"http": ["Handler"], "https": ["Handler"]}, handlers
        assert "ftp" not in opener.handle_open or all(type(h).__name__ != "Handler" for h in opener.handle_open["ftp"])


RULE = StallRule(min_bytes_per_s=100, seconds=1.0)  # the trickle below averages 400 B/s: it never stalls


def _steady_trickle(handler, length: str = "10000000") -> None:
    _headers(handler, Content_Length=length)
    for _ in range(6000):  # 40 bytes every 0.1 s for up to 10 min: only the client's deadline ends it
        handler.wfile.write(b"x" * 40)
        handler.wfile.flush()
        time.sleep(0.1)


def _endless_to_32_mib(handler) -> None:  # no Content-Length: the body ends when the server hangs up, at 32 MiB at most
    _headers(handler, Connection="close")
    for _ in range(512):
        handler.wfile.write(bytes(64 << 10))


BIG_PAGE = HTML_PAGE + b"<p>" + b"padding " * (5 << 17) + b"</p>"  # a 5 MiB error page


def _status(code: int, location: str | None = None):
    def respond(handler) -> None:
        handler.send_response(code)
        if location is not None:
            handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return respond


@contextlib.contextmanager
def _silent_port():
    """A listening socket that never accepts: connections complete in its backlog, and no reply ever comes."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        yield listener.getsockname()[1]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed on leaving: a connection there is refused


class TestBoundedTimeAndBytes:
    """Downloads against misbehaving loopback servers end in bounded time and bytes, with the module's own errors naming
    the URL: a trickle just above the stall rule meets the deadline (given, or derived from the expected size), an
    endless body meets the byte cap, an HTML page is refused from its first bytes, and a 404, a 500, a redirect loop, a
    redirect to file://, a refused connection and a silent server are ServerError or UnreachableError."""

    @pytest.mark.timeout(60)
    def test_a_trickle_above_the_stall_rule_meets_the_deadline(self, tmp_path):
        with (
            _serve(_steady_trickle) as url,
            pytest.raises(IncompleteDownloadError, match="not done within its deadline of 2 s"),
        ):
            download(url, tmp_path / "f", insecure=True, stall=RULE, deadline=2, timeout=5, progress=False)
        assert 0 < (tmp_path / "f.part").stat().st_size < 10_000  # kept for resuming, not rejected
        assert not (tmp_path / "f.rejected").exists()

    @pytest.mark.timeout(60)
    def test_the_default_deadline_comes_from_the_expected_size(self, tmp_path, monkeypatch):
        monkeypatch.setattr(download_module, "DEADLINE_BASE_S", 1.0)
        monkeypatch.setattr(download_module, "DEADLINE_BYTES_PER_S", 1000)
        assert transfer_deadline(2000) == 3.0
        with (
            _serve(lambda h: _steady_trickle(h, "2000")) as url,
            pytest.raises(IncompleteDownloadError, match="deadline of 3 s"),
        ):
            download(
                url, tmp_path / "f", insecure=True, stall=RULE, timeout=5, progress=False
            )  # 2000 B at 400 B/s: 5 s

    def test_the_default_deadline_bounds_cifar10_where_the_stall_rule_alone_does_not(self):
        cifar = data.CIFAR10_BYTES
        assert cifar / StallRule().min_bytes_per_s > 40 * 3600  # what the stall rule alone would allow: 46 hours
        assert transfer_deadline(cifar) < 3600  # the derived deadline: under an hour

    @pytest.mark.timeout(60)
    def test_an_endless_body_without_a_size_meets_the_cap(self, tmp_path):
        with (
            _serve(_endless_to_32_mib) as url,
            pytest.raises(BadResponseError, match="more than the 1048576 allowed bytes"),
        ):
            download(url, tmp_path / "f", insecure=True, max_bytes=1 << 20, progress=False)
        assert (tmp_path / "f.rejected").stat().st_size <= 1 << 20 and not (tmp_path / "f.part").exists()

    @pytest.mark.timeout(60)
    def test_the_default_cap_applies_when_no_size_is_given(self, tmp_path, monkeypatch):
        monkeypatch.setattr(download_module, "MAX_BYTES", 2 << 20)
        with (
            _serve(_endless_to_32_mib) as url,
            pytest.raises(BadResponseError, match="more than the 2097152 allowed bytes"),
        ):
            download(url, tmp_path / "f", insecure=True, progress=False)

    def test_a_reply_announcing_more_than_the_cap_is_refused_at_once(self, http_server, tmp_path):
        http_server.files["/big"] = bytes(300_000)
        with pytest.raises(BadResponseError, match="announces 300000 bytes, past the 100000 allowed"):
            download(http_server.url("/big"), tmp_path / "f", insecure=True, max_bytes=100_000, progress=False)

    @pytest.mark.parametrize("digest", [None, "0" * 64])
    def test_an_html_page_is_refused_from_its_first_bytes(self, tmp_path, digest):
        def page(handler) -> None:
            _headers(handler, Content_Length=str(len(BIG_PAGE)))
            handler.wfile.write(BIG_PAGE)

        expected = (ChecksumMismatchError, "It is an HTML page") if digest else (BadArchiveError, "sent an HTML page")
        with _serve(page) as url, pytest.raises(expected[0], match=expected[1]):
            download(url, tmp_path / "d.tgz", sha256=digest, insecure=True, kind="gzip", progress=False)
        assert (tmp_path / "d.tgz.rejected").stat().st_size < 1 << 20 < len(BIG_PAGE)  # stopped early, set aside
        assert not (tmp_path / "d.tgz").exists() and not (tmp_path / "d.tgz.part").exists()

    @pytest.mark.timeout(60)
    @pytest.mark.parametrize(
        ("respond", "match"),
        [
            (_status(404), "answered 404 Not Found; check the address"),
            (_status(500), "answered 500 Internal Server Error; try again later"),
            (_status(302, "/file"), "answered 302 .*infinite loop.*; a redirect loop, or one to a non-http\\(s\\)"),
            (_status(302, "file:///etc/passwd"), "answered 302 .*a redirect loop, or one to a non-http\\(s\\) address"),
        ],
        ids=["404", "500", "loop", "file"],
    )
    def test_error_statuses_and_bad_redirects_are_server_errors_naming_the_url(self, tmp_path, respond, match):
        with _serve(respond) as url, pytest.raises(ServerError, match=f"{url}: the server {match}") as info:
            download(url, tmp_path / "f", insecure=True, progress=False)
        assert info.value.code in (302, 404, 500)
        assert not any(tmp_path.glob("f*[!k]"))  # nothing kept but the lock: no file, no part

    @pytest.mark.timeout(60)
    def test_a_refused_connection_and_a_silent_server_are_unreachable_errors_naming_the_url(self, tmp_path):
        refused = f"http://127.0.0.1:{_closed_port()}/f"
        with pytest.raises(UnreachableError, match=f"{refused}: no reply \\(ConnectionRefusedError"):
            download(refused, tmp_path / "f", insecure=True, progress=False)
        with (
            _silent_port() as port,
            pytest.raises(UnreachableError, match=f"127.0.0.1:{port}/f: no reply .*at most 1 s"),
        ):
            download(f"http://127.0.0.1:{port}/f", tmp_path / "g", insecure=True, timeout=1, progress=False)

    def test_only_http_addresses_are_fetched(self, tmp_path):
        with pytest.raises(ValueError, match="only http:// and https:// addresses"):
            download("file:///etc/passwd", tmp_path / "f", insecure=True, progress=False)

    def test_the_course_bounds_its_bsds300_download_and_falls_back_on_a_404(self, tmp_path, monkeypatch):
        with _serve(_status(404)) as url:
            source = prepare_bsds300(tmp_path / "a", offline=False, url=url, progress=False)
        assert source.is_standin and "404" in source.note
        asked = {}

        def fake_download(url, dest, **kwargs):
            asked.update(kwargs)
            raise IncompleteDownloadError("offline in this test")

        monkeypatch.setattr(data, "download", fake_download)
        prepare_bsds300(tmp_path / "b", offline=False, progress=False)
        assert asked["max_bytes"] == data.BSDS300_MAX_BYTES <= 64 << 20 and asked["kind"] == "gzip"


LONG_NAME_PAYLOAD = b"a file of some bytes" * 100


class TestLongNames:
    """A destination whose name leaves no room for `.part` or `.rejected` (a valid 250-byte name) is still downloaded,
    its partial and rejected files under shortened hidden names beside it, never a bare 'File name too long'."""

    def test_a_name_too_long_for_its_suffix_is_downloaded_through_a_hidden_sibling(self, http_server, tmp_path):
        http_server.files["/f"] = LONG_NAME_PAYLOAD
        dest = tmp_path / ("n" * 250 + ".tgz")
        assert len(sibling_path(dest, "part").name.encode()) <= NAME_MAX < len(dest.name) + len(".part")
        digest = hashlib.sha256(LONG_NAME_PAYLOAD).hexdigest()
        assert download(http_server.url("/f"), dest, sha256=digest, progress=False).read_bytes() == LONG_NAME_PAYLOAD
        assert sorted(os.listdir(tmp_path)) == sorted([dest.name, sibling_path(dest, "lock").name])
        with pytest.raises(ChecksumMismatchError, match="expected 0000"):
            download(http_server.url("/f"), tmp_path / ("m" * 250 + ".tgz"), sha256="0" * 64, progress=False)
        assert sibling_path(tmp_path / ("m" * 250 + ".tgz"), "rejected").read_bytes() == LONG_NAME_PAYLOAD

    def test_a_name_with_room_keeps_the_plain_suffix(self, tmp_path):
        assert sibling_path(tmp_path / "f.tgz", "part") == tmp_path / "f.tgz.part"


RESUME_PAYLOAD = bytes(range(256)) * 1024  # 256 KiB
RESUME_DIGEST = hashlib.sha256(RESUME_PAYLOAD).hexdigest()


class TestResume:
    """Resuming downloads against the loopback server: a transfer one byte short is incomplete (kept, resumed), a resume
    is checked against the file's whole size, and the socket timeout is the one asked for (capped by the stall rule)."""

    def test_a_transfer_one_byte_short_is_incomplete_and_resumed(self, http_server, tmp_path):
        http_server.files["/f"] = RESUME_PAYLOAD
        http_server.cut_after["/f"] = len(RESUME_PAYLOAD) - 1
        dest = tmp_path / "f"
        with pytest.raises(IncompleteDownloadError, match="resumes"):
            download(http_server.url("/f"), dest, sha256=RESUME_DIGEST, progress=False)
        assert (tmp_path / "f.part").stat().st_size == len(RESUME_PAYLOAD) - 1
        assert not (tmp_path / "f.rejected").exists()
        assert (
            download(http_server.url("/f"), dest, sha256=RESUME_DIGEST, progress=False).read_bytes() == RESUME_PAYLOAD
        )

    def test_a_resume_counts_the_bytes_already_there_against_the_exact_size(self, http_server, tmp_path):
        http_server.files["/f"] = RESUME_PAYLOAD
        http_server.cut_after["/f"] = 100_000
        dest = tmp_path / "f"
        with pytest.raises(IncompleteDownloadError):
            download(http_server.url("/f"), dest, sha256=RESUME_DIGEST, size=len(RESUME_PAYLOAD), progress=False)
        http_server.cut_after["/f"] = 50_000  # the resumed transfer breaks off too: still incomplete, still kept
        with pytest.raises(IncompleteDownloadError, match=f"of {len(RESUME_PAYLOAD)} bytes"):
            download(http_server.url("/f"), dest, sha256=RESUME_DIGEST, size=len(RESUME_PAYLOAD), progress=False)
        assert (tmp_path / "f.part").stat().st_size == 150_000
        assert download(
            http_server.url("/f"), dest, sha256=RESUME_DIGEST, size=len(RESUME_PAYLOAD), progress=False
        ).exists()
        assert http_server.requests[-1] == ("/f", "bytes=150000-")

    @pytest.mark.parametrize(("timeout", "stall_s", "applied"), [(7.5, 60.0, 7.5), (100.0, 20.0, 20.0)])
    def test_the_socket_timeout_is_applied(self, http_server, tmp_path, monkeypatch, timeout, stall_s, applied):
        http_server.files["/f"] = RESUME_PAYLOAD
        seen = []
        real = urllib.request.OpenerDirector.open

        def urlopen(opener, request, data=None, timeout=None):
            seen.append(timeout)
            return real(opener, request, data, timeout=timeout)

        monkeypatch.setattr(download_module.urllib.request.OpenerDirector, "open", urlopen)
        stall = StallRule(seconds=stall_s)
        download(
            http_server.url("/f"), tmp_path / "f", sha256=RESUME_DIGEST, timeout=timeout, stall=stall, progress=False
        )
        assert seen == [applied]

    def test_a_416_to_a_fresh_request_is_the_servers_error_not_a_whole_part(self, tmp_path, monkeypatch):
        def urlopen(opener, request, data=None, timeout=None):
            raise urllib.error.HTTPError(request.full_url, 416, "Range Not Satisfiable", {}, None)  # type: ignore[arg-type]

        monkeypatch.setattr(download_module.urllib.request.OpenerDirector, "open", urlopen)
        with pytest.raises(
            ServerError, match="127.0.0.1:9/f: the server answered 416"
        ) as info:  # the module's own error
            download("http://127.0.0.1:9/f", tmp_path / "f", sha256=RESUME_DIGEST, progress=False)
        assert info.value.code == 416
        assert not (tmp_path / "f").exists()
