"""Crafted archives of the fourth review: a modification time no file can have (infinite, NaN, past time_t), a file
member named as the destination itself, a path longer than PATH_MAX once under the destination, and names that
differ only in case on a case-insensitive destination are each a named UnsafeArchiveError before anything is
written, never a bare OverflowError, ValueError or OSError from tarfile halfway through."""

from __future__ import annotations

import pytest

from helpers import archives
from helpers.archives import PATH_MAX, safe_extract
from helpers.tar_scan import UnsafeArchiveError

from .test_tar_scan import END, _header, _member, _octal, _pax, _refused


def _base256(value: int) -> bytes:
    return bytes([0x80]) + value.to_bytes(11, "big")


@pytest.mark.parametrize(
    ("times", "shown"),
    [({"mtime": "1e400"}, "1e400"), ({"mtime": "nan"}, "nan"), ({"mtime": "-inf"}, "-inf"), (None, str(2**80))],
)
def test_a_modification_time_no_file_can_have_is_refused(tmp_path, times, shown):
    if times is None:  # the raw header field, in GNU base-256
        header = bytearray(_member("top/a", b"1")[:512])
        header[136:148] = _base256(2**80)
        header[148:156] = b" " * 8
        header[148:156] = b"%06o\0 " % sum(header)
        data = bytes(header) + b"1" + bytes(511) + END
    else:
        data = _pax(times) + _member("top/a", b"1") + END
    _refused(tmp_path, data, UnsafeArchiveError, f"'top/a' has the modification time {shown}, which no file can be")


def test_an_ordinary_old_or_future_time_still_extracts(tmp_path):
    archive = tmp_path / "times.tar"
    archive.write_bytes(_pax({"mtime": "-86400.5"}) + _member("top/a", b"1") + _pax({"mtime": "4102444800"}))
    archive.write_bytes(archive.read_bytes() + _member("top/b", b"2") + END)
    safe_extract(archive, tmp_path / "out")
    assert (tmp_path / "out" / "top" / "a").stat().st_mtime == -86400.5
    assert (tmp_path / "out" / "top" / "b").stat().st_mtime == 4102444800


@pytest.mark.parametrize("name", [".", "./", ""])
def test_a_file_named_as_the_destination_itself_is_refused(tmp_path, name):
    data = (_pax({"path": name}) if not name else b"") + _member(name or "x", b"hello") + END
    _refused(tmp_path, data, UnsafeArchiveError, "is a file named as the destination folder itself")


def test_a_folder_member_named_dot_still_extracts(tmp_path):
    archive = tmp_path / "dot.tar"
    archive.write_bytes(_header("./", _octal(0), b"5") + _member("./top/a", b"1") + END)
    safe_extract(archive, tmp_path / "out")
    assert (tmp_path / "out" / "top" / "a").read_bytes() == b"1"


def test_a_path_past_path_max_under_the_destination_is_refused_before_writing(tmp_path):
    name = "top/" + "/".join(["d" * 200] * (PATH_MAX // 200 + 1)) + "/f"  # every part valid, the whole too long
    _refused(tmp_path, _pax({"path": name}) + _member("x", b"1") + END, UnsafeArchiveError, "past the .* a path may")


@pytest.mark.parametrize(
    ("members", "match"),
    [
        (
            [("top/Data", b"0"), ("top/data/x", b"0")],
            "makes 'top/data' a folder, where another member makes 'top/Data'",
        ),
        ([("top/README", b"0"), ("top/readme", b"0")], "'top/README' and 'top/readme' differ only in case"),
    ],
)
def test_names_that_differ_in_case_are_refused_on_a_case_insensitive_destination(tmp_path, monkeypatch, members, match):
    data = b"".join(_header(name, _octal(0), kind) for name, kind in members) + END
    archive = tmp_path / "case.tar"
    archive.write_bytes(data)
    safe_extract(archive, tmp_path / "sensitive")  # this file system keeps both
    assert len(list((tmp_path / "sensitive" / "top").iterdir())) == 2
    monkeypatch.setattr(archives, "_folds_case", lambda dest: True)  # as on macOS or Windows
    with pytest.raises(UnsafeArchiveError, match=match):
        safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_folders_that_differ_in_case_still_extract_on_a_case_insensitive_destination(tmp_path, monkeypatch):
    archive = tmp_path / "folders.tar"
    archive.write_bytes(_member("top/Data/x", b"1") + _member("top/data/y", b"2") + END)
    monkeypatch.setattr(archives, "_folds_case", lambda dest: True)
    assert len(safe_extract(archive, tmp_path / "out")) == 2


def test_the_case_probe_reads_this_file_system_and_leaves_nothing(tmp_path):
    (tmp_path / "probe-a").mkdir()
    folds = (tmp_path / "PROBE-A").is_dir()
    assert archives._folds_case(tmp_path / "not" / "yet") is folds  # the nearest existing parent is probed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe-a"]
