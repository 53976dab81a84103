"""Crafted archives of the third review: a GNU sparse map is refused by the pre-scan before tarfile reads it, and a
negative size on a pax or long-name header, a NUL in a pax path, a name that is a file in one member and a folder in
another, and a name part past NAME_MAX are each a named UnsafeArchiveError; a long but valid top folder extracts
(the hidden staging and lock names beside it are shortened to fit)."""

from __future__ import annotations

import gzip
import io
import tarfile

import pytest

from helpers import archives
from helpers.archives import extract_into, safe_extract
from helpers.tar_scan import NAME_MAX, UnsafeArchiveError

from .conftest import tar_bytes
from .test_tar_scan import END, _header, _member, _octal, _pax, _refused


def _sparse_map_archive(blocks: int, *, global_header: bool = False) -> bytes:
    """A GNU sparse 1.0 member whose map lists `blocks` (offset, size) pairs: tarfile parses the whole map in open()."""
    records = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "top/s", "GNU.sparse.realsize": "9"}
    sparse_map = b"%d\n" % blocks + b"0\n0\n" * blocks
    sparse_map += bytes(-len(sparse_map) % 512)
    pax = _pax(records)
    if global_header:  # the same records in a global pax header, which applies to every member after it
        pax = _header("././@PaxHeader", pax[124:136], b"g") + pax[512:]
    return pax + _header("top/GNUSparseFile.0/s", _octal(len(sparse_map))) + sparse_map + END


@pytest.mark.timeout(120)
@pytest.mark.parametrize("global_header", [False, True])
def test_a_gnu_sparse_map_is_refused_before_tarfile_reads_it(tmp_path, monkeypatch, global_header):
    # 500,000 map entries: 2 MB of tar, 2 KB of gzip; tarfile.open spends about a second and 200 MB on it (8 KB of
    # gzip: 4 s and 760 MB), so the pre-scan must refuse it before tarfile is asked to open anything.
    data = gzip.compress(_sparse_map_archive(500_000, global_header=global_header), mtime=0)
    assert len(data) < 4096

    def never(*args, **kwargs):
        raise AssertionError("tarfile.open was reached: the sparse map would be parsed before any check")

    monkeypatch.setattr(archives.tarfile, "open", never)
    _refused(tmp_path, data, UnsafeArchiveError, "describes a GNU sparse file \\(GNU.sparse.major\\)", "sparse.tgz")


@pytest.mark.parametrize(("kind", "what"), [(b"x", "pax"), (b"L", "long-name"), (b"g", "pax")])
def test_a_negative_size_on_a_meta_header_is_refused(tmp_path, kind, what):
    data = _header("././@LongLink", b"\xff" * 12, kind) + _member("top/a", b"1") + END
    _refused(tmp_path, data, UnsafeArchiveError, f"a {what} header at byte 0 has a negative size \\(-1\\)")


def test_a_nul_in_a_pax_path_is_refused(tmp_path):
    data = _pax({"path": "top/a\0b"}) + _member("top/x", b"1") + END
    _refused(tmp_path, data, UnsafeArchiveError, "member 'top/a\\\\x00b' has a NUL byte in its name")


@pytest.mark.parametrize(
    ("members", "match"),
    [
        (
            [("top/a", b"0"), ("top/a/b", b"0")],
            "'top/a/b' makes 'top/a' a folder, where another member makes it a file",
        ),
        ([("top/a/", b"5"), ("top/a", b"0")], "'top/a' makes 'top/a' a file, where another member makes it a folder"),
        ([("top/a/b", b"0"), ("top/a", b"0")], "'top/a' makes 'top/a' a file, where another member makes it a folder"),
    ],
)
def test_a_name_that_is_a_file_and_a_folder_is_refused(tmp_path, members, match):
    data = b"".join(_header(name, _octal(0), kind) for name, kind in members) + END
    _refused(tmp_path, data, UnsafeArchiveError, match)


def test_a_file_replaced_by_a_later_file_of_the_same_name_is_still_extracted(tmp_path):
    archive = tmp_path / "twice.tar"
    archive.write_bytes(_member("top/a", b"old") + _member("top/b/c", b"1") + _member("top/a", b"new!") + END)
    safe_extract(archive, tmp_path / "out")
    assert (tmp_path / "out" / "top" / "a").read_bytes() == b"new!"


@pytest.mark.parametrize("how", ["pax", "gnu"])
def test_a_name_part_past_name_max_is_refused(tmp_path, how):
    name = "top/" + "n" * (NAME_MAX + 1)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT if how == "pax" else tarfile.GNU_FORMAT) as t:
        info = tarfile.TarInfo(name)
        info.size = 1
        t.addfile(info, io.BytesIO(b"1"))
    _refused(tmp_path, buffer.getvalue(), UnsafeArchiveError, f"has a name part of {NAME_MAX + 1} bytes, past the 255")


def test_a_name_part_of_exactly_name_max_is_extracted(tmp_path):
    archive = tmp_path / "long.tar"
    archive.write_bytes(tar_bytes({"top/" + "n" * NAME_MAX: b"1"}, mode="w"))
    assert [len(p.name) for p in safe_extract(archive, tmp_path / "out")] == [NAME_MAX]


@pytest.mark.parametrize("length", [240, NAME_MAX])
def test_a_long_valid_top_folder_extracts_and_leaves_nothing_beside_it(tmp_path, length):
    top = "t" * length  # the staging name beside it would be ~300 bytes: shortened, as is the lock at 255
    archive = tmp_path / "a.tgz"
    archive.write_bytes(tar_bytes({f"{top}/a.txt": b"1", f"{top}/sub/b.txt": b"2"}))
    folder = extract_into(archive, tmp_path / "parent", top)
    assert (folder / "a.txt").read_bytes() == b"1" and (folder / "sub" / "b.txt").read_bytes() == b"2"
    names = sorted(p.name for p in (tmp_path / "parent").iterdir())
    lock = f"{top}.lock" if length == 240 else f".{'t' * 131}~"  # at 255 bytes, '.lock' no longer fits: shortened
    assert len(names) == 2 and top in names and all(len(n.encode()) <= NAME_MAX for n in names)
    assert [n for n in names if n != top][0].startswith(lock)
    assert extract_into(archive, tmp_path / "parent", top) == folder  # found complete the second time
