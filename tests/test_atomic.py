"""build_once builds shared data once across processes and never publishes half of it; leftovers of killed builders
are cleared; reserve_file really allocates the bytes, so a full disk is an error naming the file."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers import atomic
from helpers.archives import extract_into
from helpers.atomic import (
    DestinationError,
    build_once,
    file_lock,
    remove_stale_staging,
    reserve_file,
    staging_path,
    write_text_atomically,
)
from helpers.resized_store import ResizedStore, build_resized_store
from helpers.safe_open import NotRegularFileError, make_dirs
from helpers.shards import shard_paths, write_shards

from .conftest import tar_bytes

ROOT = Path(__file__).resolve().parents[1]


def _complete(folder: Path) -> bool:
    return (folder / "done").is_file()


def _fill(count: int = 3):
    def build(staging: Path) -> None:
        for i in range(count):
            (staging / f"{i}.txt").write_text(str(i))
        (staging / "done").touch()

    return build


def test_build_once_builds_then_reuses(tmp_path):
    target = tmp_path / "data"
    assert build_once(target, _fill(), is_complete=_complete)
    assert sorted(p.name for p in target.iterdir()) == ["0.txt", "1.txt", "2.txt", "done"]
    assert not build_once(target, lambda staging: pytest.fail("built twice"), is_complete=_complete)


def test_build_once_looks_again_after_taking_the_lock(tmp_path):
    answers = iter([False, True])  # incomplete before the lock; finished by another process while this one waited
    assert not build_once(tmp_path / "data", lambda s: pytest.fail("built"), is_complete=lambda _: next(answers))
    assert not (tmp_path / "data").exists()


def test_a_failed_build_publishes_nothing_and_leaves_nothing(tmp_path):
    def broken(staging: Path) -> None:
        (staging / "0.txt").write_text("half")
        raise OSError("disk went away")

    with pytest.raises(OSError, match="disk went away"):
        build_once(tmp_path / "data", broken, is_complete=_complete)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.lock"]


def test_leftovers_of_killed_builders_on_this_machine_are_removed(tmp_path):
    target = tmp_path / "data"
    mine = staging_path(target)
    mine.mkdir()
    (mine / "half.bin").write_bytes(b"\0" * 10)
    aside = tmp_path / mine.name.replace(".staging-", ".old-")
    aside.mkdir()
    other_host = tmp_path / ".data.staging-someotherhost-12-0123abcd"
    other_host.mkdir()
    unrelated = tmp_path / ".datafile.staging-x"
    unrelated.mkdir()
    with file_lock(target):
        assert sorted(remove_stale_staging(target)) == sorted([mine, aside])
    assert not mine.exists() and not aside.exists() and other_host.exists() and unrelated.exists()
    build_once(target, _fill(), is_complete=_complete)  # build_once clears them too
    assert _complete(target)


BUILDER = """
import sys, time
from pathlib import Path
from helpers.atomic import build_once
target, log = Path(sys.argv[1]), Path(sys.argv[2])
def build(staging):
    with open(log, "a") as f:
        f.write("built\\n")
    for i in range(20):
        (staging / f"{i}.txt").write_text(str(i))
        time.sleep(0.01)
    (staging / "done").touch()
build_once(target, build, is_complete=lambda p: (p / "done").is_file())
print(len(list(target.iterdir())))
"""


def test_processes_racing_build_once_build_exactly_once(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    args = [str(tmp_path / "data"), str(tmp_path / "log")]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", BUILDER, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0 and out.strip() == "21", err[-2000:]
    assert (tmp_path / "log").read_text() == "built\n"


def test_reserve_file_allocates_real_blocks(tmp_path):
    path = tmp_path / "store.u8"
    reserve_file(path, 5_000_000)
    assert path.stat().st_size == 5_000_000
    if hasattr(os, "posix_fallocate") and hasattr(path.stat(), "st_blocks"):
        assert path.stat().st_blocks * 512 >= 5_000_000  # not a sparse file


def test_reserve_file_names_the_file_when_the_disk_is_full(tmp_path, monkeypatch):
    def no_space(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "posix_fallocate", no_space, raising=False)
    with pytest.raises(OSError, match=r"store.u8: cannot reserve 4096 bytes \(No space left on device\); free") as info:
        reserve_file(tmp_path / "store.u8", 4096)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "store.u8")


def test_reserve_file_writes_zeros_where_fallocate_is_not_supported(tmp_path, monkeypatch):
    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(atomic.os, "posix_fallocate", unsupported, raising=False)
    reserve_file(tmp_path / "store.u8", 3_000_000)
    assert (tmp_path / "store.u8").read_bytes() == bytes(3_000_000)


# --- special files at lock and scratch names, any depth, a publish killed between its renames ----------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("make", "what"),
    [
        (os.mkfifo, r"a FIFO \(named pipe\)"),
        (os.mkdir, "a directory"),
        (lambda path: os.symlink("/etc/passwd", path), r"a symbolic link \(not followed.*\)"),
    ],
)
def test_a_lock_path_that_is_not_a_regular_file_is_named(tmp_path, make, what):
    make(tmp_path / "data.lock")
    with pytest.raises(NotRegularFileError, match=f"data.lock: is {what}, not a regular file; a lock file must be"):
        with file_lock(tmp_path / "data"):
            pass


def test_paths_deeper_than_the_recursion_limit_are_built(tmp_path):
    deepest = tmp_path.joinpath(*["d"] * 1500)
    try:
        assert build_once(deepest / "target", _fill(), is_complete=_complete)
        assert _complete(deepest / "target")
    finally:  # shutil.rmtree (and so pytest's own cleanup) recurses once per level: take the chain down here
        for leaf in ("target", "target.lock"):
            shutil.rmtree(deepest / leaf, ignore_errors=True)
            (deepest / leaf).unlink(missing_ok=True)
        while deepest != tmp_path:
            os.rmdir(deepest)
            deepest = deepest.parent


def test_a_parent_that_is_a_file_is_named(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match=r"file: is a regular file, not a folder, so .* cannot be created"):
        make_dirs(tmp_path / "file" / "sub" / "deeper")


def test_a_scratch_file_never_follows_a_planted_link(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    planted = tmp_path / ".history.json.staging-planted"
    planted.symlink_to(victim)
    monkeypatch.setattr(atomic, "staging_path", lambda target: planted)  # as if the name had been guessed
    with pytest.raises(NotRegularFileError, match="staging-planted: a scratch name already taken by a symbolic link"):
        write_text_atomically(tmp_path / "history.json", "overwritten?")
    assert victim.read_text() == "precious" and not (tmp_path / "history.json").exists()


PUBLISHER = """
import signal, sys
from pathlib import Path
from helpers import atomic
target = Path(sys.argv[1])
def killed_here(path):  # the new folder is in place, the old one set aside: be killed before removing it
    (target.parent / "inside").touch()
    signal.pause()
atomic._remove = killed_here
atomic.build_once(target, lambda staging: (staging / "done").write_text("new"), is_complete=lambda path: False)
"""


def test_the_old_folder_of_a_killed_publish_is_cleared_by_the_next_open(tmp_path):
    target = tmp_path / "data"
    build_once(target, lambda staging: (staging / "done").write_text("old"), is_complete=_complete)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    process = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(target)], env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (tmp_path / "inside").exists():
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert (target / "done").read_text() == "new" and list(tmp_path.glob(".data.old-*"))  # the leak
    assert not build_once(target, _fill(), is_complete=lambda p: (p / "done").is_file())  # complete: not rebuilt
    assert not list(tmp_path.glob(".data.*")) and (target / "done").read_text() == "new"


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


class TestWhatStandsAtTheTarget:
    """What stands at a build's target before it is built: a link the user made to a folder on another disk is followed
    (the build goes beside the real folder, the link stays), and a file where a folder goes, a folder where a file goes
    or a folder holding what the build did not make (the user's photos, given as the destination by mistake) is a
    DestinationError naming it before anything is built, with nothing replaced or deleted."""

    def test_a_file_where_the_folder_goes_is_refused_before_building(self, tmp_path):
        (tmp_path / "store").write_bytes(b"the user's file")
        with pytest.raises(DestinationError, match="store: is a regular file, where the build puts a folder"):
            build_once(tmp_path / "store", _never, is_complete=lambda p: False)
        assert (tmp_path / "store").read_bytes() == b"the user's file"

    def test_a_folder_where_the_file_goes_is_refused_before_building(self, tmp_path):
        (tmp_path / "f.bin").mkdir()
        with pytest.raises(DestinationError, match="f.bin: is a directory, where the build puts a file"):
            build_once(tmp_path / "f.bin", _never, is_complete=lambda p: False, folder=False)

    @pytest.mark.parametrize("dangling", [False, True])
    def test_a_link_to_a_folder_is_followed_and_kept(self, tmp_path, dangling):
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

    def test_a_folder_of_other_files_is_not_replaced(self, tmp_path):
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

    def test_a_folder_of_what_the_build_makes_is_rebuilt(self, tmp_path):
        samples = _photos(tmp_path / "photos")
        write_shards(samples[:2], tmp_path / "shards")
        assert (
            len(write_shards(samples, tmp_path / "shards", per_shard=2)) == len(shard_paths(tmp_path / "shards")) == 2
        )
        build_resized_store(samples[:2], tmp_path / "store", short_side=8)
        (tmp_path / "store" / ".DS_Store").write_bytes(
            b"a file browser's"
        )  # not the user's data: replaced with the rest
        assert len(ResizedStore(build_resized_store(samples, tmp_path / "store", short_side=8))) == 3
        (tmp_path / "empty").mkdir()
        assert len(write_shards(samples, tmp_path / "empty")) == 1

    def test_extract_into_a_linked_folder_keeps_the_link(self, tmp_path):
        (tmp_path / "a.tgz").write_bytes(tar_bytes({"top/x.bin": b"1" * 10}))
        (tmp_path / "big" / "top").mkdir(parents=True)
        (tmp_path / "data").mkdir()
        os.symlink(tmp_path / "big" / "top", tmp_path / "data" / "top")
        out = extract_into(tmp_path / "a.tgz", tmp_path / "data", "top", verify=lambda p: (p / "x.bin").stat())
        assert (out / "x.bin").read_bytes() == b"1" * 10 and os.path.islink(tmp_path / "data" / "top")
