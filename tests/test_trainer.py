"""The trainer: an interrupted run resumed equals an uninterrupted one; damaged checkpoints are clear errors."""

from __future__ import annotations

import json
import math
import time

import pytest
import torch
from torch import nn

from helpers.augment import cifar_train_augment
from helpers.checkpoint import CheckpointError, load_checkpoint
from helpers.loading import DeviceTensorLoader
from helpers.step import TrainStep
from helpers.trainer import fit, make_scheduler


def _setup(accumulation: int = 1):
    torch.manual_seed(0)
    images = torch.randint(0, 256, (40, 3, 32, 32), dtype=torch.uint8)
    labels = torch.randint(0, 10, (40,))
    loader = DeviceTensorLoader(images, labels, batch_size=8, augment=cifar_train_augment(), seed=3)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(64, 10)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    # 3 epochs of 5 micro-batches: groups of `accumulation`, a short last group flushed at each epoch's end
    scheduler = make_scheduler(
        optimizer, kind="onecycle", total_steps=3 * math.ceil(5 / accumulation), peak_learning_rate=0.05
    )
    return model, loader, optimizer, scheduler


def _run(tmp_path, accumulation=1, interrupt_at=None, resume=False, setup=None):
    model, loader, optimizer, scheduler = setup or _setup(accumulation)

    def after_step(micro_batches):
        if interrupt_at is not None and micro_batches == interrupt_at:
            raise KeyboardInterrupt

    step = TrainStep(
        model, optimizer, nn.CrossEntropyLoss(), device="cpu", accumulation_steps=accumulation, scheduler=scheduler
    )
    history = fit(
        model,
        loader,
        step,
        epochs=3,
        scheduler=scheduler,
        checkpoint_dir=tmp_path,
        resume=resume,
        after_step=after_step,
        progress=False,
    )
    return model, history


@pytest.mark.parametrize(("accumulation", "interrupt_at"), [(1, 7), (1, 5), (2, 8)])
def test_an_interrupted_run_resumed_ends_with_the_same_weights(tmp_path, accumulation, interrupt_at):
    straight, straight_history = _run(tmp_path / "straight", accumulation)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "broken", accumulation, interrupt_at=interrupt_at)
    state = load_checkpoint(tmp_path / "broken" / "last.pt")
    assert state["epoch"] == (interrupt_at - 1) // 5  # interrupted inside this epoch
    torch.manual_seed(12345)  # a fresh process would not share the first run's RNG state
    resumed, history = _run(tmp_path / "broken", accumulation, resume=True)
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    assert [h["epoch"] for h in history] == [1, 2, 3]
    assert json.loads((tmp_path / "broken" / "history.json").read_text())[-1]["epoch"] == 3
    assert history[-1]["optimizer_steps"] == straight_history[-1]["optimizer_steps"]
    # the interrupted epoch's train_loss averages all its batches, those before the interruption included
    losses, straight_losses = [h["train_loss"] for h in history], [h["train_loss"] for h in straight_history]
    assert losses == pytest.approx(straight_losses, rel=1e-6, abs=0)


def test_resume_after_a_finished_epoch(tmp_path):
    straight, _ = _run(tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "broken", interrupt_at=10)  # the last step of epoch 2: its checkpoint was just written
    resumed, _ = _run(tmp_path / "broken", resume=True)
    for a, b in zip(straight.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_a_truncated_checkpoint_is_a_clear_error(tmp_path):
    _run(tmp_path)
    last = tmp_path / "last.pt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    with pytest.raises(CheckpointError, match=r"last.pt: cannot read the checkpoint.*previous.pt"):
        load_checkpoint(last)
    load_checkpoint(tmp_path / "last.previous.pt")  # the one before is intact


def test_a_file_that_is_not_a_checkpoint_is_named(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(CheckpointError, match="other.pt: not a checkpoint"):
        load_checkpoint(path)
    (tmp_path / "garbage.pt").write_bytes(b"not a zip file at all")
    with pytest.raises(CheckpointError, match="garbage.pt: cannot read"):
        load_checkpoint(tmp_path / "garbage.pt")
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def test_more_epochs_after_a_finished_run_continue_the_loader_stream(tmp_path):
    """Resuming from an end-of-epoch checkpoint must draw the next epoch's order, not replay the last one."""

    def run(folder, epochs, resume):
        torch.manual_seed(0)
        images = torch.randint(0, 256, (40, 3, 32, 32), dtype=torch.uint8)
        labels = torch.randint(0, 10, (40,))
        loader = DeviceTensorLoader(images, labels, batch_size=8, seed=3)
        model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10))
        step = TrainStep(
            model,
            torch.optim.SGD(model.parameters(), lr=1e-4),
            nn.CrossEntropyLoss(),
            device="cpu",
            batch_transform=lambda x: x.float() / 255,
        )
        fit(model, loader, step, epochs=epochs, checkpoint_dir=folder, resume=resume, progress=False)
        return model

    straight = run(tmp_path / "straight", 3, resume=False)
    run(tmp_path / "split", 2, resume=False)
    resumed = run(tmp_path / "split", 3, resume=True)
    for a, b in zip(straight.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_a_time_limit_ends_training_when_the_budget_is_spent(tmp_path):
    """A run sized for a faster machine still stops at its budget: the time limit ends the epoch and the run."""
    torch.manual_seed(0)
    images = torch.randint(0, 256, (40, 3, 32, 32), dtype=torch.uint8)
    loader = DeviceTensorLoader(images, torch.randint(0, 10, (40,)), batch_size=4, seed=0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10))

    def slow_loss(outputs, targets):
        time.sleep(0.05)  # a step of at least 50 ms
        return nn.functional.cross_entropy(outputs, targets)

    step = TrainStep(
        model,
        torch.optim.SGD(model.parameters(), lr=1e-3),
        slow_loss,
        device="cpu",
        batch_transform=lambda x: x.float() / 255,
    )
    history = fit(model, loader, step, epochs=100, time_limit_s=0.3, progress=False)
    assert 1 <= step.micro_batches < 20 and len(history) == 1  # 100 epochs of 10 steps were asked for
    assert history[-1]["trained_seconds"] >= 0.3 and history[-1]["time_capped"]  # the record says the cap cut it


def test_a_run_stopped_by_max_steps_ends_its_progress_bar_at_what_ran(tmp_path, capsys):
    model, loader, optimizer, scheduler = _setup()
    step = TrainStep(model, optimizer, nn.CrossEntropyLoss(), device="cpu", scheduler=scheduler)
    fit(model, loader, step, epochs=3, max_steps=7, scheduler=scheduler, checkpoint_dir=tmp_path, progress=True)
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "7/7" in last and "100%" in last, last  # not "7/15" part-way: the plan was cut, the bar says what ran
