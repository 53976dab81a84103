"""build_fast_step hands each option on: the compile mode to torch.compile, channels_last to the step it builds."""

from __future__ import annotations

import torch
from torch import nn

import helpers.speedups as speedups_module
from helpers.speedups import SpeedUps, build_fast_step


def test_the_compile_mode_reaches_torch_compile(monkeypatch):
    modes: list[str | None] = []
    monkeypatch.setattr(speedups_module, "compiler_status", lambda device_type: (True, "stubbed"))
    monkeypatch.setattr(torch, "compile", lambda model, mode=None, **kwargs: modes.append(mode) or model)
    build_fast_step(
        nn.Linear(2, 1), nn.MSELoss(), device="cpu", options=SpeedUps(compile=True, compile_mode="max-autotune")
    )
    assert modes == ["max-autotune"]


def test_channels_last_reaches_the_step():
    model = nn.Conv2d(3, 2, 3)
    step, notes = build_fast_step(model, nn.MSELoss(), device="cpu", options=SpeedUps(channels_last=True))
    assert step.channels_last and "channels_last" in notes
    assert model.weight.is_contiguous(memory_format=torch.channels_last)
    plain, _ = build_fast_step(nn.Conv2d(3, 2, 3), nn.MSELoss(), device="cpu", options=SpeedUps(channels_last=False))
    assert not plain.channels_last


def test_fused_where_the_device_has_it_and_foreach_with_the_same_rate_where_not():
    from helpers.speedups import fast_optimizer

    fused, note = fast_optimizer("sgd", [nn.Parameter(torch.zeros(2))], device="cpu", lr=0.3)
    assert fused.defaults["fused"] is True and "fused" in note
    fallback, note = fast_optimizer("sgd", [nn.Parameter(torch.zeros(2))], device="cpu", lr=0.3, differentiable=True)
    assert fallback.defaults["foreach"] is True and fallback.defaults["lr"] == 0.3 and "foreach" in note


def test_compile_optimizer_compiles_the_optimizer_step_too(monkeypatch):
    compiled: list[str] = []

    def fake_compile(target=None, **kwargs):
        if target is None:  # used as a decorator: @torch.compile(fullgraph=False)
            return lambda function: compiled.append("optimizer step") or function
        compiled.append("model")
        return target

    monkeypatch.setattr(speedups_module, "compiler_status", lambda device_type: (True, "stubbed"))
    monkeypatch.setattr(torch, "compile", fake_compile)
    options = SpeedUps(compile=True, compile_optimizer=True)
    _, notes = build_fast_step(nn.Linear(2, 1), nn.MSELoss(), device="cpu", options=options)
    assert compiled == ["model", "optimizer step"] and "optimizer.step compiled" in notes


def test_the_plain_row_is_plain():
    from helpers.speedups import speedup_variants

    plain = speedup_variants("cpu")["plain step (foreach off)"]
    assert (plain.fused_optimizer, plain.compile, plain.channels_last, plain.cudnn_benchmark) == (
        False,
        False,
        False,
        False,
    )
