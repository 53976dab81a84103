"""safe_extract refuses absolute paths, '..', links and device files, and writes nothing when it refuses."""

from __future__ import annotations

import io
import tarfile

import pytest

from helpers.download import UnsafeArchiveError, safe_extract

from .conftest import tar_bytes


def _archive_with(tmp_path, special: tarfile.TarInfo) -> str:
    path = tmp_path / "bad.tar"
    with tarfile.open(path, "w") as tar:
        good = tarfile.TarInfo("ok/first.txt")
        good.size = 2
        tar.addfile(good, io.BytesIO(b"hi"))
        tar.addfile(special, io.BytesIO(b"x" * special.size) if special.isfile() else None)
    return path


def _file(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = 1
    return info


def _link(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def _device(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
    return info


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (_file("../escape.txt"), "'..'"),
        (_file("ok/../../escape.txt"), "'..'"),
        (_file("/tmp/absolute.txt"), "absolute"),
        (_link("ok/link", "/etc/passwd", tarfile.SYMTYPE), "link"),
        (_link("ok/hard", "/etc/passwd", tarfile.LNKTYPE), "link"),
        (_device("ok/null"), "device"),
    ],
)
def test_unsafe_members_are_refused_before_anything_is_written(tmp_path, member, reason):
    archive = _archive_with(tmp_path, member)
    dest = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError, match=reason) as info:
        safe_extract(archive, dest)
    assert "bad.tar" in str(info.value) and member.name in str(info.value)
    assert not dest.exists()  # not even the good member: all members are checked first
    assert not (tmp_path / "escape.txt").exists()


def test_a_good_archive_extracts(tmp_path):
    archive = tmp_path / "good.tgz"
    archive.write_bytes(tar_bytes({"top/a.txt": b"a", "top/sub/b.txt": b"bb"}))
    written = safe_extract(archive, tmp_path / "out")
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in written) == ["top/a.txt", "top/sub/b.txt"]
    assert (tmp_path / "out/top/sub/b.txt").read_bytes() == b"bb"
