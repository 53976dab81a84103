"""What stands where a checkpoint is read or written is named: a link to /dev/zero or a socket at last.pt is never
read (a non-blocking open checked with fstat, so the check and the read are one step), a file where the checkpoint
folder goes and a read-only folder are CheckpointErrors naming the folder and what to do, with the previous
checkpoint intact."""

from __future__ import annotations

import os
import socket

import pytest
import torch

from helpers.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

from .test_read_only_data import _in_namespace


@pytest.mark.timeout(60)
def test_a_link_to_a_device_at_the_checkpoint_is_named_not_read(tmp_path):
    os.symlink("/dev/zero", tmp_path / "last.pt")
    with pytest.raises(CheckpointError, match=r"last.pt: is a character device \(through a link\), not a checkpoint"):
        load_checkpoint(tmp_path / "last.pt")
    os.symlink(tmp_path / "gone.pt", tmp_path / "dangling.pt")
    with pytest.raises(CheckpointError, match="dangling.pt: is a link to nothing, not a checkpoint file"):
        load_checkpoint(tmp_path / "dangling.pt")


def test_a_socket_at_the_checkpoint_is_named(tmp_path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "last.pt"))
    with server, pytest.raises(CheckpointError, match="last.pt: is a socket, not a checkpoint file"):
        load_checkpoint(tmp_path / "last.pt")


def test_a_file_where_the_checkpoint_folder_goes_is_named(tmp_path):
    (tmp_path / "run").write_text("the user's notes")
    with pytest.raises(CheckpointError, match=r"run/last.pt: its folder cannot be made \(.*run\); the checkpoint was"):
        save_checkpoint({"step": 1}, tmp_path / "run" / "last.pt")
    assert (tmp_path / "run").read_text() == "the user's notes"


SAVE = """
import sys
from pathlib import Path
from helpers.checkpoint import CheckpointError, save_checkpoint
try:
    save_checkpoint({"step": 2}, Path(sys.argv[1]) / "last.pt")
    print("saved")
except CheckpointError as error:
    print(error)
"""


def test_a_read_only_checkpoint_folder_is_named_and_the_previous_checkpoint_kept(tmp_path):
    folder = tmp_path / "run"
    save_checkpoint({"step": 1}, folder / "last.pt")
    result = _in_namespace(f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}", SAVE, str(folder))
    assert result.returncode == 0, result.stderr[-2000:]
    said = result.stdout.strip().splitlines()[-1]
    assert f"{folder / 'last.pt'}: {folder} cannot be written (Read-only file system)" in said, said
    assert "the previous one is intact: make the folder writable, or save the checkpoints to another folder" in said
    assert torch.load(folder / "last.pt", weights_only=True) == {"step": 1}
