"""The training step: accumulation equals one full batch, bf16 on CPU, overflow skips counted (the schedule waits for
them), and NaN losses raised from device-side flags without reading the loss per micro-batch."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import helpers.step as step_module
from helpers.models import PatchDiscriminator, SmallEDSR
from helpers.step import (
    NonFiniteLossError,
    StepResult,
    TrainStep,
    autocast_dtype,
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
    losses = [float(step(x, y)) for _ in range(5)]
    assert losses[-1] < losses[0] and not torch.equal(before[0], _params(model)[0])


def test_fp16_overflow_is_skipped_and_counted(data):
    x, y = data
    model, optimizer = _model_and_optimizer()
    step = TrainStep(
        model, optimizer, lambda out, target: (out - target).pow(2).mean() * 1e4, device="cpu", precision="fp16"
    )
    for _ in range(6):
        step(x, y)
    assert step.skipped_steps >= 1  # the initial scale of 65536 overflows fp16 with this loss
    assert step.skipped_steps + step.optimizer_steps == 6
    assert step.scaler.get_scale() < 65536


def test_fp16_reads_the_scale_once_per_optimizer_step(data, monkeypatch):
    """Each get_scale() is a host synchronisation on CUDA: one per optimizer step tells a skipped step (the scale
    fell since the last read), and the skips are still counted exactly (the overflow test's loss, then a loss that
    does not overflow, after a restore from state)."""
    x, y = data
    model, optimizer = _model_and_optimizer()
    step = TrainStep(
        model, optimizer, lambda out, target: (out - target).pow(2).mean() * 1e4, device="cpu", precision="fp16"
    )
    reads: list[float] = []
    real = torch.amp.GradScaler.get_scale
    monkeypatch.setattr(torch.amp.GradScaler, "get_scale", lambda self: reads.append(1) or real(self))
    for _ in range(6):
        step(x, y)
    assert len(reads) == 6 and step.skipped_steps + step.optimizer_steps == 6 and step.skipped_steps >= 1
    scale, skipped = real(step.scaler), step.skipped_steps
    resumed = TrainStep(model, optimizer, nn.MSELoss(), device="cpu", precision="fp16")  # starts at 65536
    resumed.load_state_dict(step.state_dict())  # ... and resumes at the lowered scale
    for _ in range(3):
        resumed(x, y)
    assert resumed.skipped_steps == skipped and real(resumed.scaler) == scale  # no overflow: none skipped, no growth


def test_a_non_finite_loss_is_a_clear_error(data):
    x, y = data
    model, optimizer = _model_and_optimizer()
    step = TrainStep(model, optimizer, nn.MSELoss(), device="cpu")
    x = x.clone()
    x[0, 0] = float("nan")
    with pytest.raises(NonFiniteLossError, match="NaN or infinite in micro-batches 0-0"):
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
    monkeypatch.setattr(step_module, "cpu_has_native_bf16", lambda: False)
    assert native_precisions("cpu") == ["fp32"]  # AVX2-only CPUs emulate bf16: ~10x slower than fp32
    monkeypatch.setattr(step_module, "cpu_has_native_bf16", lambda: True)
    assert native_precisions("cpu") == ["fp32", "bf16"]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))  # a T4: no bf16 cores
    assert native_precisions("cuda") == ["fp32", "fp16"]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert native_precisions("cuda") == ["fp32", "fp16", "bf16"]


def test_bf16_on_a_gpu_that_only_emulates_it_is_refused_with_fp16_named(monkeypatch):
    # torch.cuda.is_bf16_supported() says True on a T4 (bf16 through emulation, slower than fp16): the step asks
    # native_precisions, which goes by compute capability
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla T4")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"Tesla T4 runs it only emulated.*precision='fp16'"):
        TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), device="cuda", precision="bf16")


class _Watched(torch.Tensor):
    """A loss that records every read of its value on the host."""

    reads: list[str] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("item", "__float__", "__bool__", "__int__", "tolist", "numpy", "__index__"):
            cls.reads.append(name)
        return super().__torch_function__(func, types, args, kwargs or {})


def test_the_step_does_not_read_its_loss_on_the_host_between_checks(data):
    x, y = data
    model, optimizer = _model_and_optimizer()
    _Watched.reads = []
    watched = lambda out, target: nn.functional.mse_loss(out, target).as_subclass(_Watched)
    step = TrainStep(model, optimizer, watched, device="cpu", accumulation_steps=2, check_finite_every=1000)
    results = [step(x[:12], y[:12]) for _ in range(10)]
    assert step.optimizer_steps == 5 and _Watched.reads == []  # 10 micro-batches, 5 optimizer steps: no read
    assert isinstance(results[0], StepResult) and results[0].outputs.shape == (12, 1)
    step.end_epoch()  # the epoch's end checks the flags once
    assert _Watched.reads == ["__bool__"]
    _Watched.reads = []
    step = TrainStep(model, optimizer, watched, device="cpu", accumulation_steps=4)  # default: every optimizer step
    for _ in range(8):
        step(x[:6], y[:6])
    assert _Watched.reads == ["__bool__", "__bool__"]  # once per optimizer step, not once per micro-batch


def test_a_non_finite_loss_is_caught_at_the_next_check(data):
    x, y = data
    model, optimizer = _model_and_optimizer()
    step = TrainStep(model, optimizer, nn.MSELoss(), device="cpu", check_finite_every=3)
    poisoned = x.clone()
    poisoned[0, 0] = float("nan")
    step(x, y)
    step(poisoned, y)  # micro-batch 1: flagged on the device, not yet read
    with pytest.raises(NonFiniteLossError, match="micro-batches 0-2"):
        step(x, y)  # the third optimizer step reads the flag


def test_skipped_fp16_steps_leave_the_schedule_where_it_was(data):
    x, y = data
    model, optimizer = _model_and_optimizer()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda n: 1.0 / (1 + n))
    step = TrainStep(
        model,
        optimizer,
        lambda out, target: (out - target).pow(2).mean() * 1e4,
        device="cpu",
        precision="fp16",
        scheduler=scheduler,
    )
    for _ in range(20):
        step(x, y)
    assert step.skipped_steps >= 1 and step.optimizer_steps >= 1  # 65536 overflows first, then a lower scale works
    assert scheduler.last_epoch == step.optimizer_steps
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.1 / (1 + step.optimizer_steps))


def test_a_per_epoch_schedule_steps_at_the_end_of_each_epoch(data):
    x, y = data
    model, optimizer = _model_and_optimizer()
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    step = TrainStep(model, optimizer, nn.MSELoss(), device="cpu", scheduler=scheduler, scheduler_interval="epoch")
    for _ in range(2):
        for _ in range(3):
            step(x, y)
        step.end_epoch()
    assert step.optimizer_steps == 6 and scheduler.last_epoch == 2
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.025)
    with pytest.raises(ValueError, match="scheduler_interval"):
        TrainStep(model, optimizer, nn.MSELoss(), device="cpu", scheduler_interval="batch")


def test_last_closes_a_short_group_like_flush(data):
    x, y = data
    models = [_model_and_optimizer() for _ in range(2)]
    flushed, hinted = (TrainStep(m, o, nn.MSELoss(), device="cpu", accumulation_steps=4) for m, o in models)
    for chunk in range(3):
        part = slice(chunk * 6, (chunk + 1) * 6)
        flushed(x[part], y[part])
        hinted(x[part], y[part], last=chunk == 2)
    assert hinted.optimizer_steps == 1 and hinted.pending == 0 and flushed.optimizer_steps == 0
    flushed.flush()
    for a, b in zip(_params(models[0][0]), _params(models[1][0])):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_gan_step_trains_both_models_and_takes_the_discriminator_s_real_images_from_where_it_is_told():
    def pair():
        torch.manual_seed(0)
        return SmallEDSR(2, features=8, blocks=1), PatchDiscriminator(8)

    lr, hr = torch.rand(2, 3, 8, 8), torch.rand(2, 3, 16, 16)
    generator, discriminator = pair()
    before = [_params(generator), _params(discriminator)]
    shared = gan_sr_step(generator, discriminator, device="cpu")((lr, hr))
    assert all(
        not all(torch.equal(a, b) for a, b in zip(old, _params(m)))
        for old, m in zip(before, (generator, discriminator))
    )
    assert shared == gan_sr_step(*pair(), device="cpu")((lr, hr), real_hr=hr)  # the same real images: same losses
    other = gan_sr_step(*pair(), device="cpu")((lr, hr), real_hr=torch.zeros_like(hr))
    assert other["d_loss"] != shared["d_loss"]


class _Recorder(nn.Module):
    """A conv net that records whether each input it saw was channels_last."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.seen = nn.Conv2d(3, 1, 3, padding=1), []

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.seen.append(images.is_contiguous(memory_format=torch.channels_last))
        return self.conv(images).mean(dim=(1, 2, 3))


def _fp16_step(model, **options):
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    loss = lambda out, target: (out.float() - target).pow(2).mean() * 1e-2  # small: the first scale does not overflow
    return TrainStep(model, optimizer, loss, device="cpu", precision="fp16", **options)


class TestStepDetails:
    """The GradScaler only for fp16, channels_last on the inputs the model sees as well as on its weights, fp16
    gradients clipped once unscaled, the step's state saved whole, a NaN early in an accumulation group kept, the batch
    transform run before the model, and the GAN step as the standard two-step update."""

    @pytest.mark.parametrize(("precision", "scaled"), [("fp32", False), ("bf16", False), ("fp16", True)])
    def test_only_fp16_uses_a_grad_scaler(self, precision, scaled):
        model = nn.Linear(3, 1)
        step = TrainStep(
            model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), device="cpu", precision=precision
        )
        assert step.scaler.is_enabled() is scaled

    @pytest.mark.parametrize("channels_last", [False, True])
    def test_channels_last_reaches_the_inputs_the_model_sees(self, channels_last):
        model = _Recorder()
        step = TrainStep(
            model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), device="cpu", channels_last=channels_last
        )
        step(torch.randn(2, 3, 6, 6), torch.zeros(2))
        assert model.seen == [channels_last]
        assert model.conv.weight.is_contiguous(memory_format=torch.channels_last) is channels_last

    def test_fp16_clips_the_unscaled_gradients(self):
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

    def test_the_step_state_round_trips_every_piece(self):
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

    def test_a_nan_early_in_an_accumulation_group_is_not_forgotten_by_its_later_micro_batches(self):
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

    def test_the_batch_transform_runs_on_the_inputs_before_the_model(self):
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

    def test_the_gan_step_is_the_standard_two_step_update(self):
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
