"""The course's data preparation against a loopback server: CIFAR-10's binary version downloaded, verified and read
with no pickle, bad archives refused before anything is published, an incomplete folder repaired, and several
processes preparing the same data folder at once (download, extraction, stand-in) all getting the complete data."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers.cifar import RECORD_BYTES, cifar10_class_names, load_cifar10
from helpers.course import data
from helpers.course.data import (
    DATA_DIR_ENV_VAR,
    DatasetLayoutError,
    bsds300_split,
    data_root,
    prepare_bsds300,
    prepare_cifar10,
)
from helpers.download import ChecksumMismatchError, IncompleteDownloadError

from ..conftest import jpeg_bytes, tar_bytes
from ..test_cifar import NAMES, cifar_batch_bytes

ROOT = Path(__file__).resolve().parents[2]


def _cifar_archive(label_fix: dict[int, int] | None = None) -> tuple[bytes, dict[str, bytes]]:
    batches = {f"data_batch_{i}.bin": cifar_batch_bytes(3 + i, seed=i, label_offset=i) for i in range(1, 6)}
    batches["test_batch.bin"] = cifar_batch_bytes(5, seed=9)
    for record, label in (label_fix or {}).items():
        raw = bytearray(batches["data_batch_2.bin"])
        raw[record * RECORD_BYTES] = label
        batches["data_batch_2.bin"] = bytes(raw)
    members = {f"cifar-10-batches-bin/{name}": body for name, body in batches.items()}
    members["cifar-10-batches-bin/batches.meta.txt"] = ("\n".join(NAMES) + "\n\n").encode()
    members["cifar-10-batches-bin/readme.html"] = b"<html>CIFAR-10</html>"
    return tar_bytes(members), batches


def test_the_course_fetches_the_binary_version():
    assert data.CIFAR10_URL == "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
    assert data.CIFAR10_MD5 == "c32a1d4ab5d03f1284b67883e8d87530"
    real_batches = 6 * 10_000 * RECORD_BYTES  # what the real archive unpacks to, besides two small text files
    assert data.CIFAR10_LIMITS.member_bytes >= 10_000 * RECORD_BYTES and data.CIFAR10_LIMITS.total_bytes > real_batches
    assert data.CIFAR10_LIMITS.total_bytes < 2 * real_batches and data.CIFAR10_LIMITS.members < 100


def test_prepare_cifar10_downloads_verifies_and_reads_the_binary_version(http_server, tmp_path):
    archive, batches = _cifar_archive()
    http_server.files["/cifar.tar.gz"] = archive
    md5 = hashlib.md5(archive).hexdigest()
    source = prepare_cifar10(tmp_path, offline=False, url=http_server.url("/cifar.tar.gz"), md5=md5, progress=False)
    assert not source.is_standin and source.root == tmp_path / "cifar-10-batches-bin" and "MD5 verified" in source.note
    images, labels = load_cifar10(source.root, train=True)
    records = np.frombuffer(b"".join(batches[f"data_batch_{i}.bin"] for i in range(1, 6)), np.uint8).reshape(-1, 3073)
    assert np.array_equal(images.numpy().reshape(len(records), -1), records[:, 1:])
    assert labels.tolist() == records[:, 0].tolist() and cifar10_class_names(source.root) == NAMES
    requests = len(http_server.requests)
    again = prepare_cifar10(tmp_path, offline=False, url=http_server.url("/cifar.tar.gz"), md5=md5, progress=False)
    assert "already prepared" in again.note and len(http_server.requests) == requests


def test_prepare_cifar10_refuses_an_archive_with_a_bad_record(http_server, tmp_path):
    archive, _ = _cifar_archive(label_fix={1: 12})
    http_server.files["/cifar.tar.gz"] = archive
    with pytest.raises(DatasetLayoutError, match=r"cifar-10-binary.tar.gz: the archive does not hold.*label 12"):
        prepare_cifar10(
            tmp_path,
            offline=False,
            url=http_server.url("/cifar.tar.gz"),
            md5=hashlib.md5(archive).hexdigest(),
            progress=False,
        )
    assert not (tmp_path / "cifar-10-batches-bin").exists()  # nothing half-checked was published


def test_prepare_cifar10_mismatch_says_how_to_proceed(http_server, tmp_path):
    archive, _ = _cifar_archive()
    http_server.files["/cifar.tar.gz"] = archive
    with pytest.raises(ChecksumMismatchError) as info:
        prepare_cifar10(tmp_path, offline=False, url=http_server.url("/cifar.tar.gz"), md5="0" * 32, progress=False)
    message = str(info.value)
    assert "Delete" in message and "checked where" in message and "COURSE_OFFLINE=1" in message


def bsds_archive(train: int = 200, test: int = 100) -> bytes:
    members = {
        f"BSDS300/images/{split}/{i}.jpg": jpeg_bytes(8, 6, seed=i)
        for split, count in (("train", train), ("test", test))
        for i in range(count)
    }
    members["BSDS300/iids_train.txt"] = b"\n".join(str(i).encode() for i in range(train))
    return tar_bytes(members)


def test_an_incomplete_bsds300_folder_is_extracted_again(http_server, tmp_path):
    archive = bsds_archive()
    http_server.files["/b.tgz"] = archive
    digest = hashlib.sha256(archive).hexdigest()
    source = prepare_bsds300(tmp_path, offline=False, url=http_server.url("/b.tgz"), sha256=digest, progress=False)
    for path in bsds300_split(source.root, "train")[:5]:
        path.unlink()  # a folder damaged by hand, or half-copied
    again = prepare_bsds300(tmp_path, offline=False, url=http_server.url("/b.tgz"), sha256=digest, progress=False)
    assert len(bsds300_split(again.root, "train")) == 200
    assert len(http_server.requests) == 1  # from the verified archive already there


PREPARER = """
import os, sys, time
from pathlib import Path
from helpers.course.data import bsds300_split, prepare_bsds300
flags = Path(sys.argv[5])
(flags / f"ready-{os.getpid()}").touch()
while not (flags / "go").exists():  # start together, so that downloads, extractions and writes overlap
    time.sleep(0.005)
real = prepare_bsds300(Path(sys.argv[1]), offline=False, url=sys.argv[2], sha256=sys.argv[3], progress=False)
standin = prepare_bsds300(Path(sys.argv[4]), offline=True)
print(len(bsds300_split(real.root, "train")), len(bsds300_split(real.root, "test")), int(standin.is_standin),
      len(bsds300_split(standin.root, "test")))
"""


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_processes_preparing_the_same_data_folder_all_get_the_whole_data(http_server, tmp_path):
    archive = bsds_archive()
    http_server.files["/b.tgz"] = archive
    digest = hashlib.sha256(archive).hexdigest()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    args = [str(tmp_path / "shared"), http_server.url("/b.tgz"), digest, str(tmp_path / "offline"), str(tmp_path)]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", PREPARER, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < len(processes) and time.monotonic() < deadline:
        time.sleep(0.01)
    (tmp_path / "go").touch()
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, err[-2000:]
        outputs.append(out.split())
    single_real = prepare_bsds300(
        tmp_path / "single", offline=False, url=http_server.url("/b.tgz"), sha256=digest, progress=False
    )
    single_standin = prepare_bsds300(tmp_path / "single_offline", offline=True)
    tests = str(len(bsds300_split(single_standin.root, "test")))
    assert outputs == [["200", "100", "1", tests]] * 3
    assert _tree(tmp_path / "shared" / "BSDS300") == _tree(single_real.root)  # byte-identical to one process's
    assert _tree(tmp_path / "offline" / "standin" / "BSDS300") == _tree(single_standin.root)
    assert len([r for r in http_server.requests if r[0] == "/b.tgz"]) == 2  # one for the three processes
    leftovers = [
        p.name
        for folder in (tmp_path / "shared", tmp_path / "offline" / "standin")
        for p in folder.iterdir()
        if p.name.startswith(".")
    ]
    assert leftovers == []


def test_a_data_dir_that_is_a_file_is_named_with_what_to_do(tmp_path, monkeypatch):
    (tmp_path / "data").write_text("not a folder")
    for configured in (tmp_path / "data", tmp_path / "data" / "sub"):
        monkeypatch.setenv(DATA_DIR_ENV_VAR, str(configured))
        with pytest.raises(
            NotADirectoryError,
            match=rf"{DATA_DIR_ENV_VAR}=.*data: is a regular file, not a folder.*"
            rf"set {DATA_DIR_ENV_VAR} to a folder",
        ):
            data_root()


def test_the_real_cifar10_download_passes_its_exact_size(tmp_path, monkeypatch):
    asked = {}

    def fake_download(url, dest, **kwargs):
        asked.update(kwargs)
        raise IncompleteDownloadError("offline in this test")

    monkeypatch.setattr(data, "download", fake_download)
    assert prepare_cifar10(tmp_path, offline=False, progress=False).is_standin
    assert asked["size"] == data.CIFAR10_BYTES == 170_052_171


def test_a_failed_download_is_said_once_briefly_and_not_retried_by_the_next_notebook(tmp_path, monkeypatch):
    """No network: the first call says so in a few words (not urlopen's whole error) and leaves a note; the next
    call, as the next notebook would make it, falls back without trying again and says when it was tried."""
    import socket

    with socket.socket() as closed:  # a port nobody listens on: the connection is refused at once
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/BSDS300-images.tgz"
    first = prepare_bsds300(tmp_path, offline=False, url=url, progress=False)
    assert first.is_standin and "the download from 127.0.0.1:" in first.note and "Connection refused" in first.note
    assert "urlopen error" not in first.note and len(first.note) < 250
    monkeypatch.setattr(data, "download", lambda *a, **k: (_ for _ in ()).throw(AssertionError("tried again")))
    again = prepare_bsds300(tmp_path, offline=False, url=url, progress=False)
    assert again.is_standin and "0 min ago; not retried for an hour" in again.note
    other = url.replace("BSDS300-images", "other")  # another URL is tried: the note is about one download
    with pytest.raises(AssertionError, match="tried again"):
        prepare_bsds300(tmp_path, offline=False, url=other, progress=False)
