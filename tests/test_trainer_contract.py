"""What fit promises beyond resumption: a DistributedSampler is told each epoch, evaluation runs every `eval_every`
epochs and at the last, and only the epoch's real last batch closes a short accumulation group early."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.step import TrainStep
from helpers.trainer import fit


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


def test_the_sampler_is_told_each_epoch_from_zero():
    loader = _Loader()
    _fit(loader, epochs=3)
    assert loader.epochs == [0, 1, 2]


def test_evaluation_runs_every_eval_every_epochs_and_at_the_last():
    evaluated = []
    evaluate = lambda model: evaluated.append(len(evaluated)) or {"score": 1.0}
    history = _fit(_Loader(), epochs=5, evaluate=evaluate, eval_every=2)
    assert [record["epoch"] for record in history if "score" in record] == [2, 4, 5]


def test_only_the_last_batch_of_the_epoch_closes_a_short_group():
    history = _fit(_Loader(), accumulation=3, epochs=2)  # groups of 3 + a short group of 1, each epoch
    assert [record["optimizer_steps"] for record in history] == [2, 4]
    history = _fit(_Loader(), accumulation=4, epochs=1)  # exactly one full group
    assert history[0]["optimizer_steps"] == 1


def test_only_rank_0_writes_checkpoints(tmp_path, monkeypatch):
    import helpers.trainer as trainer_module
    from helpers.distributed import DistributedContext

    monkeypatch.setattr(trainer_module, "all_reduce_sum", lambda values, context: list(values))  # no process group
    _fit(_Loader(), epochs=1, checkpoint_dir=tmp_path, context=DistributedContext(rank=1, world_size=2))
    assert list(tmp_path.iterdir()) == []
    _fit(_Loader(), epochs=1, checkpoint_dir=tmp_path, context=DistributedContext(rank=0, world_size=2))
    assert (tmp_path / "last.pt").is_file()


def test_ctrl_c_mid_group_saves_the_last_completed_step(tmp_path):

    from helpers.checkpoint import load_checkpoint

    def interrupt(micro_batches):
        if micro_batches == 3:  # groups of 2: the last completed optimizer step was after micro-batch 2
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _fit(_Loader(), accumulation=2, epochs=1, checkpoint_dir=tmp_path, after_step=interrupt)
    saved = load_checkpoint(tmp_path / "last.pt")
    assert (
        saved["batch_in_epoch"] == 2 and saved["step"]["micro_batches"] == 2 and saved["step"]["optimizer_steps"] == 1
    )


def test_the_schedules_span_exactly_the_steps_asked_for():
    from helpers.trainer import make_scheduler

    optimizer = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.1)
    assert make_scheduler(optimizer, kind="onecycle", total_steps=7, peak_learning_rate=0.1).total_steps == 7
    assert make_scheduler(optimizer, kind="cosine", total_steps=7, peak_learning_rate=0.1).T_max == 7


def test_the_epoch_loss_is_averaged_over_every_rank_s_batches(monkeypatch):
    import helpers.trainer as trainer_module

    alone = _fit(_Loader(), epochs=1)[0]["train_loss"]
    other_rank = lambda values, context: [values[0] + 100.0, values[1] + 4]  # another rank: 4 batches of loss 25
    monkeypatch.setattr(trainer_module, "all_reduce_sum", other_rank)
    assert _fit(_Loader(), epochs=1)[0]["train_loss"] == pytest.approx((alone * 4 + 100.0) / 8)


def test_the_time_limit_counts_the_seconds_of_earlier_epochs(monkeypatch):
    """With a clock that advances 1 s per read, the first epoch uses about 5 s of a 6 s budget: the second must end
    after its first batch (the budget is the run's, not each epoch's)."""
    from types import SimpleNamespace

    import helpers.trainer as trainer_module

    ticks = iter(range(10_000))
    monkeypatch.setattr(trainer_module, "time", SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    history = _fit(_Loader(), epochs=3, time_limit_s=6.0)
    assert history[0]["micro_batches"] == 4 and not history[0]["time_capped"]
    assert history[-1]["time_capped"] and history[-1]["micro_batches"] < 8
