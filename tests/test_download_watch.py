"""A download ends in bounded time however the server misbehaves before or inside the body: a status line or headers
trickled a byte at a time (under every socket timeout), an endless run of 100 Continue and a redirect to such a
server are cut when the reply's head has had `timeout` s in all; a body read left waiting is cut at the deadline
itself, not one socket timeout later; a redirect to ftp:// is refused like one to file://."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from helpers import download as download_module
from helpers.download import IncompleteDownloadError, ServerError, UnreachableError, download


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


@pytest.mark.timeout(60)
@pytest.mark.parametrize("respond", [_trickled_headers, _endless_continue], ids=["trickled-headers", "100-continue"])
def test_a_reply_whose_head_never_ends_is_cut_at_the_timeout(tmp_path, respond):
    with _server(respond) as url:
        start = time.monotonic()
        with pytest.raises(UnreachableError, match=f"{url}: no reply \\(its status line and headers did not end"):
            download(url, tmp_path / "f", insecure=True, timeout=1.5, progress=False)
        elapsed = time.monotonic() - start
    assert elapsed < 5, f"{elapsed:.1f} s for a head that had 1.5 s"


@pytest.mark.timeout(60)
def test_a_redirect_to_a_server_whose_head_never_ends_is_cut_too(tmp_path):
    with _server(_trickled_headers) as slow:
        location = f"HTTP/1.1 302 Found\r\nLocation: {slow}\r\nContent-Length: 0\r\n\r\n".encode()
        with _server(lambda connection: connection.sendall(location)) as url:
            start = time.monotonic()
            with pytest.raises(UnreachableError, match=f"{url}: no reply"):
                download(url, tmp_path / "f", insecure=True, timeout=1.5, progress=False)
    assert time.monotonic() - start < 5


@pytest.mark.timeout(60)
def test_a_body_read_left_waiting_is_cut_at_the_deadline_not_a_timeout_later(tmp_path):
    def silent_body(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"x" * 1000)
        time.sleep(30)

    with _server(silent_body) as url:
        start = time.monotonic()
        with pytest.raises(IncompleteDownloadError, match="not done within its deadline of 2 s \\(1000 bytes"):
            download(url, tmp_path / "f", insecure=True, timeout=20, deadline=2, progress=False)
    assert time.monotonic() - start < 6  # the socket timeout alone would have waited 20 s
    assert (tmp_path / "f.part").stat().st_size == 1000  # kept, to resume


def test_a_redirect_to_ftp_is_refused_and_never_followed(tmp_path):
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


def test_https_goes_through_the_watched_connections_too():
    opener = download_module._opener(download_module._Watch())
    handlers = {scheme: [type(h).__name__ for h in opener.handle_open.get(scheme, [])] for scheme in ("http", "https")}
    assert handlers == {"http": ["Handler"], "https": ["Handler"]}, handlers
    assert "ftp" not in opener.handle_open or all(type(h).__name__ != "Handler" for h in opener.handle_open["ftp"])
