"""safe_open's modes do what the built-in open's do on a regular file (a rewrite leaves only the new bytes, an append
keeps the old ones), and check_regular refuses a link even when it points at a regular file."""

from __future__ import annotations

import os

import pytest

from helpers.safe_open import NotRegularFileError, check_regular, describe_mode, make_dirs, open_regular


def test_writing_over_a_longer_file_leaves_only_the_new_bytes(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(b"0123456789" * 10)
    with open_regular(path, "wb") as f:
        f.write(b"new")
    assert path.read_bytes() == b"new"


def test_appending_keeps_the_old_bytes_and_r_plus_b_does_not_truncate(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(b"old")
    with open_regular(path, "ab") as f:
        f.write(b"+new")
    assert path.read_bytes() == b"old+new"
    with open_regular(path, "r+b") as f:
        assert f.read() == b"old+new"
    assert path.read_bytes() == b"old+new"


def test_check_regular_refuses_a_link_to_a_regular_file(tmp_path):
    real = tmp_path / "real.bin"
    real.write_bytes(b"x")
    link = tmp_path / "link.bin"
    link.symlink_to(real)
    assert check_regular(real).st_size == 1
    with pytest.raises(NotRegularFileError, match=r"link\.bin: is a symbolic link"):
        check_regular(link, role="a cache store")


def test_a_dangling_link_where_a_folder_goes_is_named(tmp_path):
    link = tmp_path / "gone"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(NotADirectoryError, match=r"gone: is a symbolic link, not a folder"):
        make_dirs(link / "child")


def test_describe_mode_names_each_kind(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"")
    assert describe_mode(os.lstat(path).st_mode) == "a regular file"
    assert describe_mode(os.lstat(tmp_path).st_mode) == "a directory"
