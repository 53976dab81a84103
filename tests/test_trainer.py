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


class _Loader:
    """Four fixed batches an epoch, with a sampler that records the epochs it is told."""

    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        self.batches = [
            (torch.randn(4, 3, generator=generator), torch.randn(4, 1, generator=generator)) for _ in range(4)
        ]
        self.sampler = self
        self.epochs: list[int] = []

    def set_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches)


def _fit(loader, *, accumulation=1, epochs=3, **options):
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    step = TrainStep(
        model, torch.optim.SGD(model.parameters(), lr=0.01), nn.MSELoss(), device="cpu", accumulation_steps=accumulation
    )
    return fit(model, loader, step, epochs=epochs, progress=False, **options)


class TestSamplerEvaluationAndShortGroups:
    """What fit promises beyond resumption: a DistributedSampler is told each epoch, evaluation runs every `eval_every`
    epochs and at the last, and only the epoch's real last batch closes a short accumulation group early."""

    def test_the_sampler_is_told_each_epoch_from_zero(self):
        loader = _Loader()
        _fit(loader, epochs=3)
        assert loader.epochs == [0, 1, 2]

    def test_evaluation_runs_every_eval_every_epochs_and_at_the_last(self):
        evaluated = []
        evaluate = lambda model: evaluated.append(len(evaluated)) or {"score": 1.0}
        history = _fit(_Loader(), epochs=5, evaluate=evaluate, eval_every=2)
        assert [record["epoch"] for record in history if "score" in record] == [2, 4, 5]

    def test_only_the_last_batch_of_the_epoch_closes_a_short_group(self):
        history = _fit(_Loader(), accumulation=3, epochs=2)  # groups of 3 + a short group of 1, each epoch
        assert [record["optimizer_steps"] for record in history] == [2, 4]
        history = _fit(_Loader(), accumulation=4, epochs=1)  # exactly one full group
        assert history[0]["optimizer_steps"] == 1

    def test_only_rank_0_writes_checkpoints(self, tmp_path, monkeypatch):
        import helpers.trainer as trainer_module
        from helpers.distributed import DistributedContext

        monkeypatch.setattr(trainer_module, "all_reduce_sum", lambda values, context: list(values))  # no process group
        _fit(_Loader(), epochs=1, checkpoint_dir=tmp_path, context=DistributedContext(rank=1, world_size=2))
        assert list(tmp_path.iterdir()) == []
        _fit(_Loader(), epochs=1, checkpoint_dir=tmp_path, context=DistributedContext(rank=0, world_size=2))
        assert (tmp_path / "last.pt").is_file()

    def test_ctrl_c_mid_group_saves_the_last_completed_step(self, tmp_path):

        from helpers.checkpoint import load_checkpoint

        def interrupt(micro_batches):
            if micro_batches == 3:  # groups of 2: the last completed optimizer step was after micro-batch 2
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            _fit(_Loader(), accumulation=2, epochs=1, checkpoint_dir=tmp_path, after_step=interrupt)
        saved = load_checkpoint(tmp_path / "last.pt")
        assert (
            saved["batch_in_epoch"] == 2
            and saved["step"]["micro_batches"] == 2
            and saved["step"]["optimizer_steps"] == 1
        )

    def test_the_schedules_span_exactly_the_steps_asked_for(self):
        from helpers.trainer import make_scheduler

        optimizer = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.1)
        assert make_scheduler(optimizer, kind="onecycle", total_steps=7, peak_learning_rate=0.1).total_steps == 7
        assert make_scheduler(optimizer, kind="cosine", total_steps=7, peak_learning_rate=0.1).T_max == 7

    def test_the_epoch_loss_is_averaged_over_every_rank_s_batches(self, monkeypatch):
        import helpers.trainer as trainer_module

        alone = _fit(_Loader(), epochs=1)[0]["train_loss"]
        other_rank = lambda values, context: [values[0] + 100.0, values[1] + 4]  # another rank: 4 batches of loss 25
        monkeypatch.setattr(trainer_module, "all_reduce_sum", other_rank)
        assert _fit(_Loader(), epochs=1)[0]["train_loss"] == pytest.approx((alone * 4 + 100.0) / 8)

    def test_the_time_limit_counts_the_seconds_of_earlier_epochs(self, monkeypatch):
        """With a clock that advances 1 s per read, the first epoch uses about 5 s of a 6 s budget: the second must end
        after its first batch (the budget is the run's, not each epoch's)."""
        from types import SimpleNamespace

        import helpers.trainer as trainer_module

        ticks = iter(range(10_000))
        monkeypatch.setattr(trainer_module, "time", SimpleNamespace(perf_counter=lambda: float(next(ticks))))
        history = _fit(_Loader(), epochs=3, time_limit_s=6.0)
        assert history[0]["micro_batches"] == 4 and not history[0]["time_capped"]
        assert history[-1]["time_capped"] and history[-1]["micro_batches"] < 8
