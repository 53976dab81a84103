"""A folder (or FIFO) where a checkpoint goes is refused before anything is written or moved aside: save_checkpoint
used to rename a folder at last.pt to last.previous.pt and put the new file in its place; loading one says what it
is instead of 'no such checkpoint'."""

from __future__ import annotations

import os

import pytest
import torch

from helpers.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


def _listing(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("name", ["last.pt", "last.previous.pt", "last.pt.tmp"])
def test_a_folder_where_a_checkpoint_goes_is_refused_and_left_alone(tmp_path, name):
    if name != "last.pt":
        save_checkpoint({"step": 1}, tmp_path / "last.pt")  # a good checkpoint beside the folder
    (tmp_path / name).mkdir()
    (tmp_path / name / "someone's notes.txt").write_text("keep me")
    before = _listing(tmp_path)
    with pytest.raises(CheckpointError, match=rf"{name}: is a folder, not a checkpoint file; the checkpoint was not"):
        save_checkpoint({"step": 2}, tmp_path / "last.pt")
    assert _listing(tmp_path) == before  # nothing written, nothing moved aside
    if name != "last.pt":
        assert torch.load(tmp_path / "last.pt", weights_only=True) == {"step": 1}


def test_a_fifo_at_the_checkpoint_is_refused_when_saving_and_named_when_loading(tmp_path):
    os.mkfifo(tmp_path / "last.pt")
    with pytest.raises(CheckpointError, match="last.pt: is a FIFO, not a checkpoint file"):
        save_checkpoint({"step": 2}, tmp_path / "last.pt")
    with pytest.raises(CheckpointError, match="last.pt: is a FIFO, not a checkpoint file: move it away"):
        load_checkpoint(tmp_path / "last.pt")
    (tmp_path / "run.pt").mkdir()
    with pytest.raises(CheckpointError, match="run.pt: is a folder, not a checkpoint file"):
        load_checkpoint(tmp_path / "run.pt")
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")
