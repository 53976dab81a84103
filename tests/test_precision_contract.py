"""The precision choice's measurement, event by event: warm-up first, then in every round each candidate's turn
starts its clock after a device synchronisation and stops it after another, calls alternate between candidates, and
each value is milliseconds per call; and the choice's tie rule at touching ranges."""

from __future__ import annotations

from types import SimpleNamespace

import helpers.precision as precision_module
from helpers.precision import choose_precision, interleaved_times
from helpers.spread import Spread


def test_each_turn_is_synchronised_before_its_clock_starts_and_before_it_stops(monkeypatch):
    events: list[str] = []
    clock = iter(range(0, 1000, 1))  # each clock read is 1 s after the one before

    def read_clock() -> float:
        events.append("clock")
        return float(next(clock))

    monkeypatch.setattr(precision_module, "_synchronize", lambda device: events.append("sync"))
    monkeypatch.setattr(precision_module, "time", SimpleNamespace(perf_counter=read_clock))
    calls = {"a": lambda: events.append("a"), "b": lambda: events.append("b")}
    times = interleaved_times(calls, rounds=2, per_round=3, warmup=2, device="cpu")
    turn = lambda name: ["sync", "clock", name, name, name, "sync", "clock"]
    assert events == ["a", "a", "b", "b"] + turn("a") + turn("b") + turn("a") + turn("b")
    assert times == {"a": [1000 / 3, 1000 / 3], "b": [1000 / 3, 1000 / 3]}  # ms per call: 1 s over 3 calls


def test_ranges_that_touch_overlap():
    low, high, apart = Spread(1.5, 1.0, 2.0), Spread(2.5, 2.0, 3.0), Spread(1.5, 1.0, 1.9)
    assert low.overlaps(high) and high.overlaps(low)
    assert not apart.overlaps(high) and not high.overlaps(apart)
    touching = choose_precision({"fp32": [10.0, 12.0, 14.0], "bf16": [6.0, 8.0, 10.0]}, device="cpu")
    assert touching.precision == "fp32" and touching.within_noise


def test_channels_last_reaches_the_timed_steps_and_the_cache_key(monkeypatch, tmp_path):
    import torch
    from torch import nn

    import helpers.step as step_module
    from helpers.precision import fastest_precision, model_signature

    monkeypatch.setattr(step_module, "cpu_has_native_bf16", lambda: True)
    built: list[bool] = []

    class Recording(precision_module.TrainStep):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append(self.channels_last)

    monkeypatch.setattr(precision_module, "TrainStep", Recording)
    model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten())
    example = (torch.rand(2, 3, 5, 5), torch.rand(2, 18))
    fastest_precision(model, example, loss_fn=nn.MSELoss(), device="cpu", rounds=1, channels_last=True)
    assert built == [True, True]  # fp32 and bf16, both timed in channels_last
    assert model_signature(model, example, channels_last=True) != model_signature(model, example)
    cache = tmp_path / "choice.json"
    fastest_precision(model, example, loss_fn=nn.MSELoss(), device="cpu", rounds=1, cache=cache)
    again = fastest_precision(
        model, example, loss_fn=nn.MSELoss(), device="cpu", rounds=1, cache=cache, channels_last=True
    )
    assert not again.cached  # a choice timed without channels_last is not reused for a channels_last run
