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
