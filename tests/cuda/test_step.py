"""The training step on CUDA: fp16 + GradScaler skips and counts an inf-gradient step, then updates; bf16 autocast;
channels_last; gradient accumulation equal to one big batch; the precision choice measured on the GPU."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.precision import fastest_precision
from helpers.step import TrainStep, native_precisions

pytestmark = pytest.mark.cuda


def _mlp(device: torch.device, seed: int = 1) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1)).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def _convnet(device: torch.device, seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 3, padding=1), nn.Flatten(), nn.Linear(4 * 8 * 8, 2)
    ).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


@pytest.fixture
def data():
    generator = torch.Generator().manual_seed(0)
    return torch.randn(24, 5, generator=generator), torch.randn(24, 1, generator=generator)


def _params(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def test_fp16_skips_and_counts_an_inf_gradient_step_then_the_next_good_step_updates(cuda, data):
    x, y = data
    model, optimizer = _mlp(cuda)
    step = TrainStep(model, optimizer, nn.MSELoss(), device=cuda, precision="fp16")
    outputs, _ = step.forward_loss(x, y)
    assert outputs.dtype == torch.float16 and step.scaler.is_enabled()  # autocast really ran fp16 on the GPU
    poisoned = {"on": True}
    model[0].weight.register_hook(lambda grad: grad * float("inf") if poisoned["on"] else grad)
    initial_scale, before = step.scaler.get_scale(), _params(model)

    step(x, y)  # the first weight's gradient is inf: GradScaler must skip optimizer.step and lower the scale
    assert (step.skipped_steps, step.optimizer_steps) == (1, 0)
    assert step.scaler.get_scale() == initial_scale * step.scaler.get_backoff_factor()
    assert all(torch.equal(a, b) for a, b in zip(before, _params(model)))  # nothing moved on the skipped step

    poisoned["on"] = False
    step(x, y)
    assert (step.skipped_steps, step.optimizer_steps) == (1, 1)
    assert step.scaler.get_scale() == initial_scale * step.scaler.get_backoff_factor()  # no growth after one step
    after = _params(model)
    assert all(torch.isfinite(p).all() for p in after)
    assert all(not torch.equal(a, b) for a, b in zip(before, after))  # every parameter was updated


def test_bf16_autocast_trains_on_cuda(cuda, data):
    if not torch.cuda.is_bf16_supported(including_emulation=False):  # a T4 emulates it: not what this test is for
        pytest.skip(f"{torch.cuda.get_device_name(cuda)} has no bf16 (compute capability 8.0+ needed)")
    x, y = data
    model, optimizer = _mlp(cuda)
    step = TrainStep(model, optimizer, nn.MSELoss(), device=cuda, precision="bf16")
    outputs, _ = step.forward_loss(x, y)
    assert outputs.dtype == torch.bfloat16 and not step.scaler.is_enabled()  # bf16 needs no GradScaler
    losses = [float(step(x, y)) for _ in range(8)]
    assert losses[-1] < losses[0] and step.optimizer_steps == 8 and step.skipped_steps == 0


def test_channels_last_on_cuda_trains_like_the_default_layout(cuda, exact_fp32):
    images, labels = torch.randn(6, 3, 8, 8, generator=torch.Generator().manual_seed(0)), torch.tensor([0, 1] * 3)
    results = []
    for channels_last in (False, True):
        model, optimizer = _convnet(cuda)
        step = TrainStep(model, optimizer, nn.CrossEntropyLoss(), device=cuda, channels_last=channels_last)
        if channels_last:
            assert model[0].weight.is_contiguous(memory_format=torch.channels_last)
            outputs, _ = step.forward_loss(images, labels)  # the input is converted on its way in, too
        for _ in range(3):
            step(images, labels)
        results.append(_params(model))
    for plain, last in zip(*results):
        torch.testing.assert_close(plain, last, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("precision, tolerance", [("fp32", 1e-6), ("fp16", 2e-3)])
def test_accumulation_equals_one_big_batch_on_cuda(cuda, data, exact_fp32, precision, tolerance):
    x, y = (t / 4 for t in data)  # small values: fp16 gradients under the initial scale of 65536 do not overflow
    full_model, full_optimizer = _mlp(cuda)
    TrainStep(full_model, full_optimizer, nn.MSELoss(), device=cuda, precision=precision)(x, y)
    model, optimizer = _mlp(cuda)
    step = TrainStep(model, optimizer, nn.MSELoss(), device=cuda, precision=precision, accumulation_steps=4)
    for chunk in range(4):
        step(x[chunk * 6 : (chunk + 1) * 6], y[chunk * 6 : (chunk + 1) * 6])
    assert step.optimizer_steps == 1 and step.skipped_steps == 0 and step.pending == 0
    for a, b in zip(_params(full_model), _params(model)):
        torch.testing.assert_close(a, b, atol=tolerance, rtol=tolerance)


def test_native_precisions_and_the_measured_choice_on_this_gpu(cuda, data):
    major, _ = torch.cuda.get_device_capability(cuda)
    candidates = native_precisions(cuda)
    assert candidates == ["fp32", "fp16", *(["bf16"] if major >= 8 else [])]
    x, y = data
    model, _ = _mlp(torch.device("cpu"))
    choice = fastest_precision(model, (x, y), loss_fn=nn.MSELoss(), device=cuda, rounds=3, steps=2)
    assert set(choice.step_ms) == set(choice.step_ms_range) == set(candidates) and choice.cost_s > 0
    assert all(low <= choice.step_ms[p] <= high for p, (low, high) in choice.step_ms_range.items())
    assert choice.precision in candidates and choice.precision in choice.reason
    if not choice.within_noise:  # a clear ranking: the fastest median wins
        assert choice.precision == min(choice.step_ms, key=choice.step_ms.get)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_steps_between_checks_never_synchronise_the_host(cuda, data, precision):
    if precision == "bf16" and "bf16" not in native_precisions(cuda):
        pytest.skip(f"bf16 is not native on {torch.cuda.get_device_name(cuda)}")
    x, y = (t.to(cuda) for t in data)
    model, optimizer = _mlp(cuda)
    step = TrainStep(model, optimizer, nn.MSELoss(), device=cuda, precision=precision, accumulation_steps=2)
    for _ in range(4):  # warm-up outside the check: cuBLAS handles, the allocator, pinned flag buffers
        step(x, y)
    torch.cuda.synchronize(cuda)
    torch.cuda.set_sync_debug_mode("error")
    try:
        results = [step(x, y) for _ in range(8)]  # 8 micro-batches, 4 optimizer steps, 4 non-blocking checks
    finally:
        torch.cuda.set_sync_debug_mode("default")
    step.end_epoch()  # waits for the device and reads every flag: all finite
    assert step.optimizer_steps == 6 and all(r.loss.device.type == "cuda" for r in results)
    assert all(torch.isfinite(r.loss) for r in results)
