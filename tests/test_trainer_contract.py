"""What fit promises beyond resumption: a DistributedSampler is told each epoch, evaluation runs every `eval_every`
epochs and at the last, and only the epoch's real last batch closes a short accumulation group early."""

from __future__ import annotations

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
