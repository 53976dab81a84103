"""The download code against a loopback HTTP server: good archive, wrong checksum, cut-short transfer, resume, broken
range replies, HTML error pages, a digest required, and several processes fetching the same file at once."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers.course.data import BSDS300_SHA256_ENV_VAR, DatasetLayoutError, prepare_bsds300, prepare_cifar10
from helpers.download import BadArchiveError, ChecksumMismatchError, IncompleteDownloadError, download

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
        prepare_bsds300(tmp_path, offline=False, url=http_server.url("/BSDS300-images.tgz"), sha256=sha256(HTML_PAGE),
                        progress=False)  # fmt: skip
    assert not (tmp_path / "BSDS300").exists() and not (tmp_path / "BSDS300-images.tgz").exists()
    (tmp_path / "BSDS300-images.tgz").write_bytes(HTML_PAGE)  # stored by an older version that trusted its digest
    with pytest.raises(BadArchiveError, match=r"BSDS300-images.tgz: is an HTML page.*delete it and run again"):
        prepare_bsds300(tmp_path, offline=False, url=http_server.url("/BSDS300-images.tgz"), sha256=sha256(HTML_PAGE),
                        progress=False)  # fmt: skip


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
    processes = [subprocess.Popen([sys.executable, "-c", DOWNLOADER, *args], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]  # fmt: skip
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
