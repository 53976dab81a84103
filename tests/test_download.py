"""The download code against a loopback HTTP server: good archive, wrong checksum, cut-short transfer, resume."""

from __future__ import annotations

import hashlib

import pytest

from helpers.course.data import BSDS300_SHA256_ENV_VAR, DatasetLayoutError, prepare_bsds300, prepare_cifar10
from helpers.download import ChecksumMismatchError, IncompleteDownloadError, download

from .conftest import jpeg_bytes, tar_bytes

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
    assert "run again" in message  # and what to do
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


def test_prepare_cifar10_downloads_with_md5(http_server, tmp_path):
    from .test_cifar import cifar_batch_bytes

    members = {f"cifar-10-batches-py/data_batch_{i}": cifar_batch_bytes(4, seed=i) for i in range(1, 6)}
    members["cifar-10-batches-py/test_batch"] = cifar_batch_bytes(3, seed=9)
    members["cifar-10-batches-py/batches.meta"] = b"\x80\x02}q\x00."  # an empty dict; not read here
    archive = tar_bytes(members)
    http_server.files["/cifar.tar.gz"] = archive
    source = prepare_cifar10(
        tmp_path, offline=False, url=http_server.url("/cifar.tar.gz"), md5=hashlib.md5(archive).hexdigest(),
        progress=False,
    )  # fmt: skip
    assert not source.is_standin and (source.root / "test_batch").is_file()
