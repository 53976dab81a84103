"""What the training step promises beyond its main tests: the GradScaler only for fp16, channels_last on the inputs
the model sees as well as on its weights."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.step import TrainStep


@pytest.mark.parametrize(("precision", "scaled"), [("fp32", False), ("bf16", False), ("fp16", True)])
def test_only_fp16_uses_a_grad_scaler(precision, scaled):
    model = nn.Linear(3, 1)
    step = TrainStep(
        model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), device="cpu", precision=precision
    )
    assert step.scaler.is_enabled() is scaled


class _Recorder(nn.Module):
    """A conv net that records whether each input it saw was channels_last."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.seen = nn.Conv2d(3, 1, 3, padding=1), []

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.seen.append(images.is_contiguous(memory_format=torch.channels_last))
        return self.conv(images).mean(dim=(1, 2, 3))


@pytest.mark.parametrize("channels_last", [False, True])
def test_channels_last_reaches_the_inputs_the_model_sees(channels_last):
    model = _Recorder()
    step = TrainStep(
        model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), device="cpu", channels_last=channels_last
    )
    step(torch.randn(2, 3, 6, 6), torch.zeros(2))
    assert model.seen == [channels_last]
    assert model.conv.weight.is_contiguous(memory_format=torch.channels_last) is channels_last


def _fp16_step(model, **options):
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    loss = lambda out, target: (out.float() - target).pow(2).mean() * 1e-2  # small: the first scale does not overflow
    return TrainStep(model, optimizer, loss, device="cpu", precision="fp16", **options)


def test_fp16_clips_the_unscaled_gradients():
    """Clipping under a GradScaler must see the true gradients: clipped to norm 0.01, an SGD step of lr 1 moves the
    weights by 0.01, not by 0.01 / the scale (what clipping the scaled gradients gives)."""
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    step = _fp16_step(model, max_grad_norm=0.01)
    step(torch.randn(16, 8) * 10, torch.randn(16, 1) * 10)
    assert step.optimizer_steps == 1 and step.skipped_steps == 0
    moved = torch.cat([p.detach().flatten() for p in model.parameters()]) - before
    assert float(moved.norm()) == pytest.approx(0.01, rel=0.05)


def test_the_step_state_round_trips_every_piece():
    """Counters and the GradScaler's scale and growth tracker all come back from state_dict into a fresh step."""
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    loss = lambda out, target: (out.float() - target).pow(2).mean() * 10  # overflows at first: steps are skipped
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=1e-6), loss, device="cpu", precision="fp16")
    for _ in range(12):
        step(torch.randn(8, 4), torch.randn(8, 1))
    saved = step.state_dict()
    assert saved["skipped_steps"] >= 1 and saved["optimizer_steps"] >= 1 and saved["micro_batches"] == 12
    assert saved["scaler"]["_growth_tracker"] > 0
    fresh = TrainStep(model, torch.optim.SGD(model.parameters(), lr=1e-6), loss, device="cpu", precision="fp16")
    fresh.load_state_dict(saved)
    restored = fresh.state_dict()
    assert {k: v for k, v in restored.items() if k != "scaler"} == {k: v for k, v in saved.items() if k != "scaler"}
    assert restored["scaler"] == saved["scaler"] and fresh.scaler.get_scale() == step.scaler.get_scale() < 65536
