"""Resuming downloads against the loopback server: a transfer one byte short is incomplete (kept, resumed), a resume
is checked against the file's whole size, and the socket timeout is the one asked for (capped by the stall rule)."""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request

import pytest

from helpers import download as download_module
from helpers.download import IncompleteDownloadError, ServerError, StallRule, download

PAYLOAD = bytes(range(256)) * 1024  # 256 KiB
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


def test_a_transfer_one_byte_short_is_incomplete_and_resumed(http_server, tmp_path):
    http_server.files["/f"] = PAYLOAD
    http_server.cut_after["/f"] = len(PAYLOAD) - 1
    dest = tmp_path / "f"
    with pytest.raises(IncompleteDownloadError, match="resumes"):
        download(http_server.url("/f"), dest, sha256=DIGEST, progress=False)
    assert (tmp_path / "f.part").stat().st_size == len(PAYLOAD) - 1
    assert not (tmp_path / "f.rejected").exists()
    assert download(http_server.url("/f"), dest, sha256=DIGEST, progress=False).read_bytes() == PAYLOAD


def test_a_resume_counts_the_bytes_already_there_against_the_exact_size(http_server, tmp_path):
    http_server.files["/f"] = PAYLOAD
    http_server.cut_after["/f"] = 100_000
    dest = tmp_path / "f"
    with pytest.raises(IncompleteDownloadError):
        download(http_server.url("/f"), dest, sha256=DIGEST, size=len(PAYLOAD), progress=False)
    http_server.cut_after["/f"] = 50_000  # the resumed transfer breaks off too: still incomplete, still kept
    with pytest.raises(IncompleteDownloadError, match=f"of {len(PAYLOAD)} bytes"):
        download(http_server.url("/f"), dest, sha256=DIGEST, size=len(PAYLOAD), progress=False)
    assert (tmp_path / "f.part").stat().st_size == 150_000
    assert download(http_server.url("/f"), dest, sha256=DIGEST, size=len(PAYLOAD), progress=False).exists()
    assert http_server.requests[-1] == ("/f", "bytes=150000-")


@pytest.mark.parametrize(("timeout", "stall_s", "applied"), [(7.5, 60.0, 7.5), (100.0, 20.0, 20.0)])
def test_the_socket_timeout_is_applied(http_server, tmp_path, monkeypatch, timeout, stall_s, applied):
    http_server.files["/f"] = PAYLOAD
    seen = []
    real = urllib.request.OpenerDirector.open

    def urlopen(opener, request, data=None, timeout=None):
        seen.append(timeout)
        return real(opener, request, data, timeout=timeout)

    monkeypatch.setattr(download_module.urllib.request.OpenerDirector, "open", urlopen)
    stall = StallRule(seconds=stall_s)
    download(http_server.url("/f"), tmp_path / "f", sha256=DIGEST, timeout=timeout, stall=stall, progress=False)
    assert seen == [applied]


def test_a_416_to_a_fresh_request_is_the_servers_error_not_a_whole_part(tmp_path, monkeypatch):
    def urlopen(opener, request, data=None, timeout=None):
        raise urllib.error.HTTPError(request.full_url, 416, "Range Not Satisfiable", {}, None)  # type: ignore[arg-type]

    monkeypatch.setattr(download_module.urllib.request.OpenerDirector, "open", urlopen)
    with pytest.raises(ServerError, match="127.0.0.1:9/f: the server answered 416") as info:  # the module's own error
        download("http://127.0.0.1:9/f", tmp_path / "f", sha256=DIGEST, progress=False)
    assert info.value.code == 416
    assert not (tmp_path / "f").exists()
