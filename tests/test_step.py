"""The training step: accumulation equals one full batch, bf16 on CPU, overflow skips counted, NaN losses raised."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.models import PatchDiscriminator, SmallEDSR
from helpers.step import (
    NonFiniteLossError,
    TrainStep,
    autocast_dtype,
    fastest_precision,
    gan_sr_step,
    native_precisions,
)


def _model_and_optimizer(seed: int = 1):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


@pytest.fixture
def data():
    generator = torch.Generator().manual_seed(0)
    return torch.randn(24, 5, generator=generator), torch.randn(24, 1, generator=generator)


def _params(model):
    return [p.detach().clone() for p in model.parameters()]


def test_accumulation_equals_one_full_batch(data):
    x, y = data
    full_model, full_opt = _model_and_optimizer()
    TrainStep(full_model, full_opt, nn.MSELoss(), device="cpu")(x, y)
    acc_model, acc_opt = _model_and_optimizer()
    step = TrainStep(acc_model, acc_opt, nn.MSELoss(), device="cpu", accumulation_steps=4)
    for chunk in range(4):
        step(x[chunk * 6 : (chunk + 1) * 6], y[chunk * 6 : (chunk + 1) * 6])
    assert step.optimizer_steps == 1 and step.pending == 0
    for a, b in zip(_params(full_model), _params(acc_model)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_a_short_last_group_is_flushed_as_the_mean_of_its_micro_batches(data):
    x, y = data
    full_model, full_opt = _model_and_optimizer()
    TrainStep(full_model, full_opt, nn.MSELoss(), device="cpu")(x[:18], y[:18])
    acc_model, acc_opt = _model_and_optimizer()
    step = TrainStep(acc_model, acc_opt, nn.MSELoss(), device="cpu", accumulation_steps=4)
    for chunk in range(3):  # only 3 of 4 micro-batches before the epoch ends
        step(x[chunk * 6 : (chunk + 1) * 6], y[chunk * 6 : (chunk + 1) * 6])
    assert step.optimizer_steps == 0
    step.flush()
    assert step.optimizer_steps == 1
    for a, b in zip(_params(full_model), _params(acc_model)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_bf16_autocast_runs_on_cpu(data):
    x, y = data
    model, optimizer = _model_and_optimizer()
    step = TrainStep(model, optimizer, nn.MSELoss(), device="cpu", precision="bf16")
    outputs, _ = step.forward_loss(x, y)
    assert outputs.dtype == torch.bfloat16  # the linear layers really ran in bf16
    before = _params(model)
    losses = [step(x, y) for _ in range(5)]
    assert losses[-1] < losses[0] and not torch.equal(before[0], _params(model)[0])


def test_fp16_overflow_is_skipped_and_counted(data):
    x, y = data
    model, optimizer = _model_and_optimizer()
    step = TrainStep(model, optimizer, lambda out, target: (out - target).pow(2).mean() * 1e4, device="cpu",
                     precision="fp16")
    for _ in range(6):
        step(x, y)
    assert step.skipped_steps >= 1  # the initial scale of 65536 overflows fp16 with this loss
    assert step.skipped_steps + step.optimizer_steps == 6
    assert step.scaler.get_scale() < 65536


def test_a_non_finite_loss_is_a_clear_error(data):
    x, y = data
    model, optimizer = _model_and_optimizer()
    step = TrainStep(model, optimizer, nn.MSELoss(), device="cpu")
    x = x.clone()
    x[0, 0] = float("nan")
    with pytest.raises(NonFiniteLossError, match="loss is nan at micro-batch 0"):
        step(x, y)


def test_channels_last_and_scheduler():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Flatten(), nn.Linear(4 * 8 * 8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    step = TrainStep(model, optimizer, nn.CrossEntropyLoss(), device="cpu", channels_last=True, scheduler=scheduler)
    assert model[0].weight.is_contiguous(memory_format=torch.channels_last)
    step(torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 0, 1]))
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.05)


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision must be one of"):
        autocast_dtype("fp8")


def test_native_precisions_follow_the_hardware(monkeypatch):
    import helpers.step as step_module

    monkeypatch.setattr(step_module, "cpu_has_native_bf16", lambda: False)
    assert native_precisions("cpu") == ["fp32"]  # AVX2-only CPUs emulate bf16: ~10x slower than fp32
    monkeypatch.setattr(step_module, "cpu_has_native_bf16", lambda: True)
    assert native_precisions("cpu") == ["fp32", "bf16"]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))  # a T4: no bf16 cores
    assert native_precisions("cuda") == ["fp32", "fp16"]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert native_precisions("cuda") == ["fp32", "fp16", "bf16"]


def test_fastest_precision_times_the_candidates_and_says_why(data, monkeypatch):
    import helpers.step as step_module

    x, y = data
    model, _ = _model_and_optimizer()
    monkeypatch.setattr(step_module, "cpu_has_native_bf16", lambda: False)
    choice = fastest_precision(model, (x, y), loss_fn=nn.MSELoss(), device="cpu")
    assert choice.precision == "fp32" and choice.step_ms == {} and "only precision" in choice.reason
    monkeypatch.setattr(step_module, "cpu_has_native_bf16", lambda: True)
    before = _params(model)
    choice = fastest_precision(model, (x, y), loss_fn=nn.MSELoss(), device="cpu", steps=2)
    assert set(choice.step_ms) == {"fp32", "bf16"} and choice.precision == min(choice.step_ms, key=choice.step_ms.get)
    assert all(v > 0 for v in choice.step_ms.values()) and choice.precision in choice.reason
    assert all(torch.equal(a, b) for a, b in zip(before, _params(model)))  # timed on a copy: the model is untouched


def test_gan_step_trains_both_models_and_takes_the_discriminator_s_real_images_from_where_it_is_told():
    def pair():
        torch.manual_seed(0)
        return SmallEDSR(2, features=8, blocks=1), PatchDiscriminator(8)

    lr, hr = torch.rand(2, 3, 8, 8), torch.rand(2, 3, 16, 16)
    generator, discriminator = pair()
    before = [_params(generator), _params(discriminator)]
    shared = gan_sr_step(generator, discriminator, device="cpu")((lr, hr))
    assert all(not all(torch.equal(a, b) for a, b in zip(old, _params(m)))
               for old, m in zip(before, (generator, discriminator)))  # fmt: skip
    assert shared == gan_sr_step(*pair(), device="cpu")((lr, hr), real_hr=hr)  # the same real images: same losses
    other = gan_sr_step(*pair(), device="cpu")((lr, hr), real_hr=torch.zeros_like(hr))
    assert other["d_loss"] != shared["d_loss"]
