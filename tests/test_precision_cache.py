"""The precision cache is a file a user names (`cache=`): a FIFO or /dev/zero there is read as no cache, never
blocked on or read until memory runs out; saving goes through a fresh scratch file (a link planted at its name is
removed, never written through) under a lock, so processes saving at once keep every entry; a folder at the path is
named."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os

import pytest

from helpers.precision import PrecisionChoice, load_cached_choice, save_cached_choice

from .test_safe_open_routing import _within


def _choice(precision: str = "fp32") -> PrecisionChoice:
    return PrecisionChoice(precision, {precision: 1.0}, "measured", {precision: (1.0, 1.2)}, False, 0.5)


@pytest.mark.timeout(60)
def test_a_fifo_or_device_at_the_cache_is_no_cache_and_never_read(tmp_path):
    os.mkfifo(tmp_path / "fifo.json")
    os.symlink("/dev/zero", tmp_path / "zero.json")
    for name in ("fifo.json", "zero.json"):
        assert _within(20, lambda: load_cached_choice(tmp_path / name, "k")) is None  # noqa: B023 (called at once)
    save_cached_choice(tmp_path / "fifo.json", "k", _choice())  # the FIFO is replaced by the file, not written into
    assert load_cached_choice(tmp_path / "fifo.json", "k") == dataclasses.replace(_choice(), cached=True)


def test_a_link_planted_at_the_scratch_name_is_not_written_through(tmp_path):
    (tmp_path / "victim").write_text("precious")
    os.symlink(tmp_path / "victim", tmp_path / f"c.json.{os.getpid()}.tmp")
    save_cached_choice(tmp_path / "c.json", "k", _choice())
    assert (tmp_path / "victim").read_text() == "precious"
    assert sorted(json.loads((tmp_path / "c.json").read_text())) == ["k"]


def _save_many(path: str, prefix: str) -> None:
    for i in range(80):
        save_cached_choice(path, f"{prefix}{i}", _choice())


@pytest.mark.timeout(120)
def test_processes_saving_at_once_keep_every_entry(tmp_path):
    path = str(tmp_path / "c.json")
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_save_many, args=(path, prefix)) for prefix in "abc"]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(100)
    assert all(w.exitcode == 0 for w in writers)
    assert len(json.loads((tmp_path / "c.json").read_text())) == 240


def test_a_folder_at_the_cache_path_is_named(tmp_path):
    (tmp_path / "c.json").mkdir()
    with pytest.raises(IsADirectoryError, match="c.json: is a folder, where the precision cache"):
        save_cached_choice(tmp_path / "c.json", "k", _choice())
