"""Checkpoints: a crash between the renames of a save still resumes (from the complete `.tmp`, or the one before, with
a message saying which); a checkpoint of another model or one missing a key is a CheckpointError naming the file and
what differs; torch is new enough for weights_only=True to hold."""

from __future__ import annotations

import os
import random
import re
import socket
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from helpers import checkpoint
from helpers.checkpoint import (
    TRAINER_KEYS,
    CheckpointError,
    check_run_config,
    load_checkpoint,
    load_latest_checkpoint,
    rng_states,
    save_checkpoint,
    validate_rng_states,
)
from helpers.step import TrainStep
from helpers.trainer import fit, restore

from .test_read_only_data import _in_namespace

ROOT = Path(__file__).resolve().parents[1]


def _state(epoch: int) -> dict:
    return {
        "model": {"w": torch.full((2,), float(epoch))},
        "optimizer": {},
        "step": {},
        "epoch": epoch,
        "batch_in_epoch": 0,
        "rng": {},
        "history": [],
        "trained_seconds": 0.0,
        "run": {},
    }


def _crash_between_the_renames(monkeypatch) -> None:
    real, calls = os.replace, []

    def replace(source, target):
        calls.append(target)
        if len(calls) == 2:  # the old checkpoint was moved aside; the new one is complete but not yet renamed
            raise KeyboardInterrupt("power cut")
        return real(source, target)

    monkeypatch.setattr(checkpoint.os, "replace", replace)


def test_a_crash_between_the_renames_resumes_from_the_complete_tmp(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    save_checkpoint(_state(1), path)
    save_checkpoint(_state(2), path)
    with monkeypatch.context() as patch:
        _crash_between_the_renames(patch)
        with pytest.raises(KeyboardInterrupt):
            save_checkpoint(_state(3), path)
    assert not path.exists() and (tmp_path / "last.pt.tmp").is_file() and (tmp_path / "last.previous.pt").is_file()
    with pytest.warns(UserWarning, match=r"last.pt: no such checkpoint.*resuming from .*last.pt.tmp"):
        state, used = load_latest_checkpoint(path)
    assert used.name == "last.pt.tmp" and state["epoch"] == 3


def test_a_damaged_last_and_tmp_fall_back_to_the_previous_checkpoint(tmp_path):
    path = tmp_path / "last.pt"
    save_checkpoint(_state(1), path)
    save_checkpoint(_state(2), path)
    path.write_bytes(path.read_bytes()[:100])  # truncated
    (tmp_path / "last.pt.tmp").write_bytes(b"half a zip")  # a save killed while writing
    with pytest.warns(UserWarning, match=r"last.pt: cannot read the checkpoint.*resuming from .*last.previous.pt"):
        state, used = load_latest_checkpoint(path)
    assert used.name == "last.previous.pt" and state["epoch"] == 1


def test_with_nothing_usable_every_file_tried_is_named(tmp_path):
    with pytest.raises(CheckpointError, match="last.pt: no such checkpoint; start without --resume"):
        load_latest_checkpoint(tmp_path / "last.pt")
    (tmp_path / "last.pt").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match=r"no usable checkpoint: .*last.pt: cannot read.*previous.pt: no such"):
        load_latest_checkpoint(tmp_path / "last.pt")


def test_the_checkpoint_is_on_disk_before_it_is_renamed_into_place(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(checkpoint.os, "fsync", lambda fd: synced.append(fd))
    save_checkpoint(_state(1), tmp_path / "last.pt")
    assert synced and load_checkpoint(tmp_path / "last.pt")["epoch"] == 1


def _train(folder: Path, width: int = 4, epochs: int = 1, resume: bool = False) -> tuple[nn.Module, TrainStep]:
    torch.manual_seed(0)
    data = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(2)]
    model = nn.Sequential(nn.Linear(3, width), nn.ReLU(), nn.Linear(width, 1))
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), nn.MSELoss(), device="cpu")
    fit(model, data, step, epochs=epochs, checkpoint_dir=folder, resume=resume, progress=False)
    return model, step


def test_resume_after_a_crash_between_the_renames(tmp_path, monkeypatch):
    _train(tmp_path, epochs=1)
    with monkeypatch.context() as patch:
        _crash_between_the_renames(patch)
        with pytest.raises(KeyboardInterrupt):
            _train(tmp_path, epochs=2, resume=True)  # epoch 2's save is cut between its renames
    assert not (tmp_path / "last.pt").exists()
    with pytest.warns(UserWarning, match="last.pt.tmp"):
        _train(tmp_path, epochs=3, resume=True)
    assert load_checkpoint(tmp_path / "last.pt")["epoch"] == 3
    assert [h["epoch"] for h in load_checkpoint(tmp_path / "last.pt")["history"]] == [1, 2, 3]


def test_a_checkpoint_of_another_model_names_the_file_and_what_differs(tmp_path):
    _train(tmp_path, width=4)
    model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))  # wider: every tensor has another shape
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), device="cpu")
    with pytest.raises(CheckpointError, match=r"last.pt: the saved model does not fit this model") as info:
        restore(tmp_path, model=model, step=step)
    assert "of another shape" in str(info.value) and "0.weight: saved (4, 3), here (8, 3)" in str(info.value)
    other = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1), nn.Tanh(), nn.Linear(1, 1))
    step = TrainStep(other, torch.optim.SGD(other.parameters(), lr=0.1), nn.MSELoss(), device="cpu")
    with pytest.raises(CheckpointError, match=r"2 missing \(4.weight, 4.bias\)"):
        restore(tmp_path, model=other, step=step)


def test_a_checkpoint_for_another_optimizer_is_named(tmp_path):
    _train(tmp_path)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    groups = [{"params": model[0].parameters()}, {"params": model[2].parameters()}]  # two groups, not one
    step = TrainStep(model, torch.optim.SGD(groups, lr=0.1), nn.MSELoss(), device="cpu")
    with pytest.raises(CheckpointError, match="last.pt: the saved optimizer does not fit this optimizer"):
        restore(tmp_path, model=model, step=step)


@pytest.mark.parametrize("key", ["step", "history", "trained_seconds", "model"])
def test_a_checkpoint_missing_a_key_is_named(tmp_path, key):
    _train(tmp_path)
    state = torch.load(tmp_path / "last.pt", weights_only=True)
    del state[key]
    torch.save(state, tmp_path / "last.pt")
    (tmp_path / "last.previous.pt").unlink(missing_ok=True)
    model, step = _train(tmp_path / "other")
    with pytest.raises(CheckpointError, match=rf"last.pt: not a checkpoint of this trainer \(missing \['{key}'\]\)"):
        restore(tmp_path, model=model, step=step)


def test_torch_is_new_enough_for_weights_only_loading():
    # torch.load(weights_only=True) could be bypassed before 2.6 (CVE-2025-32434).
    text = (ROOT / "pyproject.toml").read_text()
    floors = {
        name: tuple(int(x) for x in version.split("."))
        for name, version in re.findall(r'"(torch|torchvision)>=([\d.]+)"', text)
    }
    assert floors["torch"] >= (2, 6) and floors["torchvision"] >= (0, 21)
    assert tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 6)


def _train_on(folder: Path, data: list, *, resume: bool = False, run: dict | None = None, precision: str = "fp32"):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    step = TrainStep(
        model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), device="cpu", precision=precision
    )
    fit(model, data, step, epochs=2, checkpoint_dir=folder, resume=resume, progress=False, run=run)
    return step


def test_every_checkpoint_stores_the_run_configuration(tmp_path):
    data = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(3)]
    _train_on(tmp_path, data, run={"recipe": "sr", "sizes": {"batch": 8}})
    assert load_checkpoint(tmp_path / "last.pt")["run"] == {
        "batches_per_epoch": 3,
        "precision": "fp32",
        "accumulation_steps": 1,
        "world_size": 1,
        "recipe": "sr",
        "sizes": {"batch": 8},
    }


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"batches": 2}, "batches_per_epoch: saved 3, this run 2"),
        ({"precision": "bf16"}, "precision: saved 'fp32'"),
        ({"run": {"recipe": "cifar"}}, "recipe: saved 'sr', this run 'cifar'"),
    ],
)
def test_resuming_another_run_configuration_names_both(tmp_path, change, named):
    data = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(3)]
    _train_on(tmp_path, data, run={"recipe": "sr"})
    with pytest.raises(CheckpointError, match=re.escape(named)):
        _train_on(
            tmp_path,
            data[: change.get("batches", 3)],
            resume=True,
            run=change.get("run", {"recipe": "sr"}),
            precision=change.get("precision", "fp32"),
        )


def test_a_mid_epoch_checkpoint_resumed_with_fewer_batches_is_a_checkpoint_error(tmp_path):
    from helpers.trainer import TrainState, train_one_epoch

    model = nn.Linear(3, 1)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), device="cpu")
    data = [(torch.randn(2, 3), torch.randn(2, 1))] * 2
    with pytest.raises(CheckpointError, match="after batch 5 of its epoch, but this loader has only 2 batches"):
        train_one_epoch(model, data, step, TrainState(batch_in_epoch=5))


@pytest.mark.parametrize("damage", ["rng", "run", "epoch"])
def test_an_older_or_foreign_format_is_a_checkpoint_error(tmp_path, damage):
    data = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(3)]
    _train_on(tmp_path, data)
    state = torch.load(tmp_path / "last.pt", weights_only=True)
    state[damage] = {"rng": {"torch": state["rng"]["torch"]}, "run": [1, 2], "epoch": "two"}[damage]
    torch.save(state, tmp_path / "last.pt")
    (tmp_path / "last.previous.pt").unlink()
    with pytest.raises(CheckpointError, match="last.pt: .*(older or foreign format|another format)"):
        _train_on(tmp_path, data, resume=True)


def test_a_full_disk_removes_the_partial_file_and_says_so(tmp_path, monkeypatch):
    import errno

    path = tmp_path / "last.pt"
    save_checkpoint(_state(1), path)

    def full(state, f):
        f.write(b"x" * 1000)  # part of the checkpoint reached the disk
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint.torch, "save", full)
    with pytest.raises(OSError, match="the disk is full") as info:
        save_checkpoint(_state(2), path)
    assert info.value.errno == errno.ENOSPC and "last.pt" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]  # no .tmp left behind
    monkeypatch.undo()
    assert load_checkpoint(path)["epoch"] == 1  # the previous checkpoint is intact


def test_the_scratch_file_does_not_follow_a_planted_link(tmp_path):
    victim = tmp_path / "someone_elses_file"
    victim.write_text("precious")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "last.pt.tmp").symlink_to(victim)
    save_checkpoint(_state(1), tmp_path / "run" / "last.pt")
    assert victim.read_text() == "precious"
    assert load_checkpoint(tmp_path / "run" / "last.pt")["epoch"] == 1


class TestWhatLoadingChecks:
    """Loading refuses pickled code (weights_only), a setting only this run has is a difference too, checking saved
    RNG states leaves the current ones untouched, and the CUDA generators are saved where CUDA is available."""

    def test_a_checkpoint_holding_pickled_objects_is_refused(self, tmp_path):
        path = tmp_path / "last.pt"
        torch.save({**{key: 0 for key in TRAINER_KEYS}, "run": Fraction(1, 3)}, path)  # not a weights-only type
        with pytest.raises(CheckpointError, match="cannot read"):
            load_checkpoint(path)

    def test_a_setting_only_this_run_has_is_named(self):
        with pytest.raises(CheckpointError, match="crop: saved None, this run 96"):
            check_run_config({"precision": "fp32"}, {"precision": "fp32", "crop": 96}, path="last.pt")

    def test_validating_saved_rng_states_leaves_the_current_ones_as_they_were(self):
        torch.manual_seed(1)
        np.random.seed(1)
        random.seed(1)
        saved = rng_states()
        torch.manual_seed(2)
        np.random.seed(2)
        random.seed(2)
        expected = rng_states()
        draws = (float(torch.rand(())), float(np.random.rand()), random.random())
        from helpers.checkpoint import set_rng_states

        set_rng_states(expected)
        validate_rng_states(saved, path="last.pt")
        assert (float(torch.rand(())), float(np.random.rand()), random.random()) == draws

    def test_the_cuda_generators_are_captured_where_cuda_is_available(self, monkeypatch):
        states = [torch.tensor([1, 2], dtype=torch.uint8)]  # stands in for each GPU's generator state
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: states)
        assert rng_states()["cuda"] is states


def _listing(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


class TestFolderOrFifoAtTheCheckpoint:
    """A folder (or FIFO) where a checkpoint goes is refused before anything is written or moved aside: save_checkpoint
    used to rename a folder at last.pt to last.previous.pt and put the new file in its place; loading one says what it
    is instead of 'no such checkpoint'."""

    @pytest.mark.parametrize("name", ["last.pt", "last.previous.pt", "last.pt.tmp"])
    def test_a_folder_where_a_checkpoint_goes_is_refused_and_left_alone(self, tmp_path, name):
        if name != "last.pt":
            save_checkpoint({"step": 1}, tmp_path / "last.pt")  # a good checkpoint beside the folder
        (tmp_path / name).mkdir()
        (tmp_path / name / "someone's notes.txt").write_text("keep me")
        before = _listing(tmp_path)
        with pytest.raises(
            CheckpointError, match=rf"{name}: is a folder, not a checkpoint file; the checkpoint was not"
        ):
            save_checkpoint({"step": 2}, tmp_path / "last.pt")
        assert _listing(tmp_path) == before  # nothing written, nothing moved aside
        if name != "last.pt":
            assert torch.load(tmp_path / "last.pt", weights_only=True) == {"step": 1}

    def test_a_fifo_at_the_checkpoint_is_refused_when_saving_and_named_when_loading(self, tmp_path):
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


class TestDevicesSocketsAndReadOnlyFolders:
    """What stands where a checkpoint is read or written is named: a link to /dev/zero or a socket at last.pt is never
    read (a non-blocking open checked with fstat, so the check and the read are one step), a file where the checkpoint
    folder goes and a read-only folder are CheckpointErrors naming the folder and what to do, with the previous
    checkpoint intact."""

    @pytest.mark.timeout(60)
    def test_a_link_to_a_device_at_the_checkpoint_is_named_not_read(self, tmp_path):
        os.symlink("/dev/zero", tmp_path / "last.pt")
        with pytest.raises(
            CheckpointError, match=r"last.pt: is a character device \(through a link\), not a checkpoint"
        ):
            load_checkpoint(tmp_path / "last.pt")
        os.symlink(tmp_path / "gone.pt", tmp_path / "dangling.pt")
        with pytest.raises(CheckpointError, match="dangling.pt: is a link to nothing, not a checkpoint file"):
            load_checkpoint(tmp_path / "dangling.pt")

    def test_a_socket_at_the_checkpoint_is_named(self, tmp_path):
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(tmp_path / "last.pt"))
        with server, pytest.raises(CheckpointError, match="last.pt: is a socket, not a checkpoint file"):
            load_checkpoint(tmp_path / "last.pt")

    def test_a_file_where_the_checkpoint_folder_goes_is_named(self, tmp_path):
        (tmp_path / "run").write_text("the user's notes")
        with pytest.raises(
            CheckpointError, match=r"run/last.pt: its folder cannot be made \(.*run\); the checkpoint was"
        ):
            save_checkpoint({"step": 1}, tmp_path / "run" / "last.pt")
        assert (tmp_path / "run").read_text() == "the user's notes"

    def test_a_read_only_checkpoint_folder_is_named_and_the_previous_checkpoint_kept(self, tmp_path):
        folder = tmp_path / "run"
        save_checkpoint({"step": 1}, folder / "last.pt")
        result = _in_namespace(
            f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}", SAVE, str(folder)
        )
        assert result.returncode == 0, result.stderr[-2000:]
        said = result.stdout.strip().splitlines()[-1]
        assert f"{folder / 'last.pt'}: {folder} cannot be written (Read-only file system)" in said, said
        assert "the previous one is intact: make the folder writable, or save the checkpoints to another folder" in said
        assert torch.load(folder / "last.pt", weights_only=True) == {"step": 1}
