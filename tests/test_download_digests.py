"""A file's digest must match the expected one in full (a shared prefix is not a match) and in any letter case; a
file already at `dest` is checked so before anything is fetched."""

from __future__ import annotations

import hashlib

import pytest

from helpers.download import ChecksumMismatchError, download, verify_file

UNREACHABLE = "http://127.0.0.1:9/never-asked"  # a file at dest is verified before any transfer


def _last_char_changed(digest: str) -> str:
    return digest[:-1] + ("0" if digest[-1] != "0" else "1")


@pytest.mark.parametrize("algorithm", ["sha256", "md5"])
def test_a_digest_that_differs_only_at_its_end_is_a_mismatch(tmp_path, algorithm):
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
def test_a_digest_in_capitals_is_the_same_digest(tmp_path, algorithm):
    dest = tmp_path / "data.bin"
    dest.write_bytes(b"the published bytes")
    right = hashlib.new(algorithm, dest.read_bytes()).hexdigest().upper()
    verify_file(dest, **{algorithm: right})
    assert download(UNREACHABLE, dest, progress=False, **{algorithm: right}) == dest
