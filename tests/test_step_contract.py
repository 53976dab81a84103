"""What the training step promises beyond its main tests: the GradScaler only for fp16, channels_last on the inputs
the model sees as well as on its weights."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.models import PatchDiscriminator, SmallEDSR
from helpers.step import NonFiniteLossError, TrainStep, gan_sr_step


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


def test_a_nan_early_in_an_accumulation_group_is_not_forgotten_by_its_later_micro_batches():
    """The flag ORs every micro-batch's: a NaN loss in the first of two micro-batches is raised at the group's step,
    although the second micro-batch's loss was finite."""
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    step = TrainStep(
        model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), device="cpu", accumulation_steps=2
    )
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    step(x, torch.full_like(y, float("nan")))  # its loss is NaN; the weights are still finite until the step
    with pytest.raises(NonFiniteLossError, match="micro-batches 0-1"):
        step(x, y)


def test_the_batch_transform_runs_on_the_inputs_before_the_model():
    model = nn.Linear(3, 1)
    step = TrainStep(
        model,
        torch.optim.SGD(model.parameters(), lr=0.1),
        nn.MSELoss(),
        device="cpu",
        batch_transform=lambda inputs: inputs * 0,
    )
    outputs, _ = step.forward_loss(torch.randn(5, 3), torch.zeros(5, 1))
    torch.testing.assert_close(outputs, model.bias.detach().expand(5, 1))


def test_the_gan_step_is_the_standard_two_step_update():
    """An independent reference: the discriminator's BCE on real (ones) and detached fake (zeros), then the
    generator's L1 + weight * BCE(D(fake), ones), each with its own Adam; losses and weights must agree."""

    def pair():
        torch.manual_seed(0)
        return SmallEDSR(2, features=8, blocks=1), PatchDiscriminator(8)

    torch.manual_seed(1)
    lr, hr, real = torch.rand(2, 3, 8, 8), torch.rand(2, 3, 16, 16), torch.rand(2, 3, 16, 16)
    generator, discriminator = pair()
    got = gan_sr_step(generator, discriminator, device="cpu", adversarial_weight=0.1)((lr, hr), real_hr=real)
    g, d = pair()
    g_opt, d_opt = (torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.99)) for m in (g, d))
    bce = nn.functional.binary_cross_entropy_with_logits
    fake = g(lr)
    real_logits, fake_logits = d(real), d(fake.detach())
    d_loss = bce(real_logits, torch.ones_like(real_logits)) + bce(fake_logits, torch.zeros_like(fake_logits))
    d_loss.backward()
    d_opt.step()
    g_opt.zero_grad()
    judged = d(fake)
    g_loss = nn.functional.l1_loss(fake, hr) + 0.1 * bce(judged, torch.ones_like(judged))
    g_loss.backward()
    g_opt.step()
    torch.testing.assert_close(got["d_loss"], d_loss.detach())
    torch.testing.assert_close(got["g_loss"], g_loss.detach())
    for mine, theirs in ((generator, g), (discriminator, d)):
        for a, b in zip(mine.parameters(), theirs.parameters()):
            torch.testing.assert_close(a, b)
