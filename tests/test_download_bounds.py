"""Downloads against misbehaving loopback servers end in bounded time and bytes, with the module's own errors naming
the URL: a trickle just above the stall rule meets the deadline (given, or derived from the expected size), an
endless body meets the byte cap, an HTML page is refused from its first bytes, and a 404, a 500, a redirect loop, a
redirect to file://, a refused connection and a silent server are ServerError or UnreachableError."""

from __future__ import annotations

import contextlib
import socket
import time

import pytest

from helpers import download as download_module
from helpers.course import data
from helpers.course.data import prepare_bsds300
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
)

from .test_download import HTML_PAGE, _headers, _serve

RULE = StallRule(min_bytes_per_s=100, seconds=1.0)  # the trickle below averages 400 B/s: it never stalls


def _trickle(handler, length: str = "10000000") -> None:
    _headers(handler, Content_Length=length)
    for _ in range(6000):  # 40 bytes every 0.1 s for up to 10 min: only the client's deadline ends it
        handler.wfile.write(b"x" * 40)
        handler.wfile.flush()
        time.sleep(0.1)


@pytest.mark.timeout(60)
def test_a_trickle_above_the_stall_rule_meets_the_deadline(tmp_path):
    with _serve(_trickle) as url, pytest.raises(IncompleteDownloadError, match="not done within its deadline of 2 s"):
        download(url, tmp_path / "f", insecure=True, stall=RULE, deadline=2, timeout=5, progress=False)
    assert 0 < (tmp_path / "f.part").stat().st_size < 10_000  # kept for resuming, not rejected
    assert not (tmp_path / "f.rejected").exists()


@pytest.mark.timeout(60)
def test_the_default_deadline_comes_from_the_expected_size(tmp_path, monkeypatch):
    monkeypatch.setattr(download_module, "DEADLINE_BASE_S", 1.0)
    monkeypatch.setattr(download_module, "DEADLINE_BYTES_PER_S", 1000)
    assert transfer_deadline(2000) == 3.0
    with _serve(lambda h: _trickle(h, "2000")) as url, pytest.raises(IncompleteDownloadError, match="deadline of 3 s"):
        download(url, tmp_path / "f", insecure=True, stall=RULE, timeout=5, progress=False)  # 2000 B at 400 B/s: 5 s


def test_the_default_deadline_bounds_cifar10_where_the_stall_rule_alone_does_not():
    cifar = data.CIFAR10_BYTES
    assert cifar / StallRule().min_bytes_per_s > 40 * 3600  # what the stall rule alone would allow: 46 hours
    assert transfer_deadline(cifar) < 3600  # the derived deadline: under an hour


def _endless(handler) -> None:  # no Content-Length: the body ends when the server hangs up, at 32 MiB at most
    _headers(handler, Connection="close")
    for _ in range(512):
        handler.wfile.write(bytes(64 << 10))


@pytest.mark.timeout(60)
def test_an_endless_body_without_a_size_meets_the_cap(tmp_path):
    with _serve(_endless) as url, pytest.raises(BadResponseError, match="more than the 1048576 allowed bytes"):
        download(url, tmp_path / "f", insecure=True, max_bytes=1 << 20, progress=False)
    assert (tmp_path / "f.rejected").stat().st_size <= 1 << 20 and not (tmp_path / "f.part").exists()


@pytest.mark.timeout(60)
def test_the_default_cap_applies_when_no_size_is_given(tmp_path, monkeypatch):
    monkeypatch.setattr(download_module, "MAX_BYTES", 2 << 20)
    with _serve(_endless) as url, pytest.raises(BadResponseError, match="more than the 2097152 allowed bytes"):
        download(url, tmp_path / "f", insecure=True, progress=False)


def test_a_reply_announcing_more_than_the_cap_is_refused_at_once(http_server, tmp_path):
    http_server.files["/big"] = bytes(300_000)
    with pytest.raises(BadResponseError, match="announces 300000 bytes, past the 100000 allowed"):
        download(http_server.url("/big"), tmp_path / "f", insecure=True, max_bytes=100_000, progress=False)


BIG_PAGE = HTML_PAGE + b"<p>" + b"padding " * (5 << 17) + b"</p>"  # a 5 MiB error page


@pytest.mark.parametrize("digest", [None, "0" * 64])
def test_an_html_page_is_refused_from_its_first_bytes(tmp_path, digest):
    def page(handler) -> None:
        _headers(handler, Content_Length=str(len(BIG_PAGE)))
        handler.wfile.write(BIG_PAGE)

    expected = (ChecksumMismatchError, "It is an HTML page") if digest else (BadArchiveError, "sent an HTML page")
    with _serve(page) as url, pytest.raises(expected[0], match=expected[1]):
        download(url, tmp_path / "d.tgz", sha256=digest, insecure=True, kind="gzip", progress=False)
    assert (tmp_path / "d.tgz.rejected").stat().st_size < 1 << 20 < len(BIG_PAGE)  # stopped early, set aside
    assert not (tmp_path / "d.tgz").exists() and not (tmp_path / "d.tgz.part").exists()


def _status(code: int, location: str | None = None):
    def respond(handler) -> None:
        handler.send_response(code)
        if location is not None:
            handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return respond


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
def test_error_statuses_and_bad_redirects_are_server_errors_naming_the_url(tmp_path, respond, match):
    with _serve(respond) as url, pytest.raises(ServerError, match=f"{url}: the server {match}") as info:
        download(url, tmp_path / "f", insecure=True, progress=False)
    assert info.value.code in (302, 404, 500)
    assert not any(tmp_path.glob("f*[!k]"))  # nothing kept but the lock: no file, no part


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


@pytest.mark.timeout(60)
def test_a_refused_connection_and_a_silent_server_are_unreachable_errors_naming_the_url(tmp_path):
    refused = f"http://127.0.0.1:{_closed_port()}/f"
    with pytest.raises(UnreachableError, match=f"{refused}: no reply \\(ConnectionRefusedError"):
        download(refused, tmp_path / "f", insecure=True, progress=False)
    with _silent_port() as port, pytest.raises(UnreachableError, match=f"127.0.0.1:{port}/f: no reply .*at most 1 s"):
        download(f"http://127.0.0.1:{port}/f", tmp_path / "g", insecure=True, timeout=1, progress=False)


def test_only_http_addresses_are_fetched(tmp_path):
    with pytest.raises(ValueError, match="only http:// and https:// addresses"):
        download("file:///etc/passwd", tmp_path / "f", insecure=True, progress=False)


def test_the_course_bounds_its_bsds300_download_and_falls_back_on_a_404(tmp_path, monkeypatch):
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
