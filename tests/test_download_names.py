"""A destination whose name leaves no room for `.part` or `.rejected` (a valid 250-byte name) is still downloaded,
its partial and rejected files under shortened hidden names beside it, never a bare 'File name too long'."""

from __future__ import annotations

import hashlib
import os

import pytest

from helpers.atomic import NAME_MAX, sibling_path
from helpers.download import ChecksumMismatchError, download

PAYLOAD = b"a file of some bytes" * 100


def test_a_name_too_long_for_its_suffix_is_downloaded_through_a_hidden_sibling(http_server, tmp_path):
    http_server.files["/f"] = PAYLOAD
    dest = tmp_path / ("n" * 250 + ".tgz")
    assert len(sibling_path(dest, "part").name.encode()) <= NAME_MAX < len(dest.name) + len(".part")
    digest = hashlib.sha256(PAYLOAD).hexdigest()
    assert download(http_server.url("/f"), dest, sha256=digest, progress=False).read_bytes() == PAYLOAD
    assert sorted(os.listdir(tmp_path)) == sorted([dest.name, sibling_path(dest, "lock").name])
    with pytest.raises(ChecksumMismatchError, match="expected 0000"):
        download(http_server.url("/f"), tmp_path / ("m" * 250 + ".tgz"), sha256="0" * 64, progress=False)
    assert sibling_path(tmp_path / ("m" * 250 + ".tgz"), "rejected").read_bytes() == PAYLOAD


def test_a_name_with_room_keeps_the_plain_suffix(tmp_path):
    assert sibling_path(tmp_path / "f.tgz", "part") == tmp_path / "f.tgz.part"
