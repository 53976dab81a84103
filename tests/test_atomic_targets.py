"""What stands at a build's target before it is built: a link the user made to a folder on another disk is followed
(the build goes beside the real folder, the link stays), and a file where a folder goes, a folder where a file goes
or a folder holding what the build did not make (the user's photos, given as the destination by mistake) is a
DestinationError naming it before anything is built, with nothing replaced or deleted."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from helpers.archives import extract_into
from helpers.atomic import DestinationError, build_once
from helpers.resized_store import ResizedStore, build_resized_store
from helpers.shards import shard_paths, write_shards

from .conftest import tar_bytes


def _never(staging):
    raise AssertionError("build was called: the target should have been refused first")


def _photos(folder, count=3):
    folder.mkdir(parents=True, exist_ok=True)
    samples = []
    for i in range(count):
        path = folder / f"p{i}.png"
        Image.fromarray(np.full((12, 16, 3), 40 * i, np.uint8)).save(path)
        samples.append((str(path), i % 2))
    return samples


def test_a_file_where_the_folder_goes_is_refused_before_building(tmp_path):
    (tmp_path / "store").write_bytes(b"the user's file")
    with pytest.raises(DestinationError, match="store: is a regular file, where the build puts a folder"):
        build_once(tmp_path / "store", _never, is_complete=lambda p: False)
    assert (tmp_path / "store").read_bytes() == b"the user's file"


def test_a_folder_where_the_file_goes_is_refused_before_building(tmp_path):
    (tmp_path / "f.bin").mkdir()
    with pytest.raises(DestinationError, match="f.bin: is a directory, where the build puts a file"):
        build_once(tmp_path / "f.bin", _never, is_complete=lambda p: False, folder=False)


@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_to_a_folder_is_followed_and_kept(tmp_path, dangling):
    real = tmp_path / "big-disk" / "store"
    if not dangling:
        real.mkdir(parents=True)
        (real / "old").write_text("an incomplete earlier build")
    (tmp_path / "data").mkdir()
    os.symlink(real, tmp_path / "data" / "store")

    def build(staging):
        (staging / "done").write_text("yes")

    assert build_once(tmp_path / "data" / "store", build, is_complete=lambda p: (p / "done").is_file())
    assert os.path.islink(tmp_path / "data" / "store")
    assert sorted(os.listdir(tmp_path / "data" / "store")) == ["done"]
    assert sorted(os.listdir(tmp_path / "data")) == ["store"]  # no staging or lock beside the link
    assert not build_once(tmp_path / "data" / "store", _never, is_complete=lambda p: (p / "done").is_file())


def test_a_folder_of_other_files_is_not_replaced(tmp_path):
    folder = tmp_path / "photos"
    samples = _photos(folder)
    (folder / "notes.txt").write_text("the user's notes")
    for write in (
        lambda: write_shards(samples, folder),
        lambda: build_resized_store(samples, folder, short_side=8),
    ):
        with pytest.raises(DestinationError, match="holds 4 entries this build did not make .*delete them"):
            write()
        assert sorted(os.listdir(folder)) == ["notes.txt", "p0.png", "p1.png", "p2.png"]


def test_a_folder_of_what_the_build_makes_is_rebuilt(tmp_path):
    samples = _photos(tmp_path / "photos")
    write_shards(samples[:2], tmp_path / "shards")
    assert len(write_shards(samples, tmp_path / "shards", per_shard=2)) == len(shard_paths(tmp_path / "shards")) == 2
    build_resized_store(samples[:2], tmp_path / "store", short_side=8)
    (tmp_path / "store" / ".DS_Store").write_bytes(b"a file browser's")  # not the user's data: replaced with the rest
    assert len(ResizedStore(build_resized_store(samples, tmp_path / "store", short_side=8))) == 3
    (tmp_path / "empty").mkdir()
    assert len(write_shards(samples, tmp_path / "empty")) == 1


def test_extract_into_a_linked_folder_keeps_the_link(tmp_path):
    (tmp_path / "a.tgz").write_bytes(tar_bytes({"top/x.bin": b"1" * 10}))
    (tmp_path / "big" / "top").mkdir(parents=True)
    (tmp_path / "data").mkdir()
    os.symlink(tmp_path / "big" / "top", tmp_path / "data" / "top")
    out = extract_into(tmp_path / "a.tgz", tmp_path / "data", "top", verify=lambda p: (p / "x.bin").stat())
    assert (out / "x.bin").read_bytes() == b"1" * 10 and os.path.islink(tmp_path / "data" / "top")
