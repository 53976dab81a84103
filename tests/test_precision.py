"""The precision choice: the candidates timed interleaved on a copy of the model, with ranges, saying when they are
within the noise (fp32 kept then), and reusable from its cache."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
from types import SimpleNamespace

import pytest
import torch
from torch import nn

import helpers.precision as precision_module
import helpers.step as step_module
from helpers.precision import (
    PrecisionChoice,
    choose_precision,
    fastest_precision,
    interleaved_times,
    load_cached_choice,
    save_cached_choice,
)
from helpers.spread import Spread

from . import test_step
from .test_safe_open import _within
from .test_step import _model_and_optimizer, _params

data = test_step.data  # the same batches' fixture as the step's tests


def test_fastest_precision_times_the_candidates_interleaved_and_says_why(data, monkeypatch, tmp_path):
    x, y = data
    model, _ = _model_and_optimizer()
    monkeypatch.setattr(step_module, "cpu_has_native_bf16", lambda: False)
    choice = fastest_precision(model, (x, y), loss_fn=nn.MSELoss(), device="cpu")
    assert choice.precision == "fp32" and choice.step_ms == {} and "only precision" in choice.reason
    monkeypatch.setattr(step_module, "cpu_has_native_bf16", lambda: True)
    order = []
    real = precision_module.interleaved_times

    def recording(calls, **kwargs):
        wrapped = {name: (lambda name=name, fn=fn: (order.append(name), fn())) for name, fn in calls.items()}
        return real(wrapped, **kwargs)

    monkeypatch.setattr(precision_module, "interleaved_times", recording)
    before = _params(model)
    cache = tmp_path / "precision.json"
    choice = fastest_precision(model, (x, y), loss_fn=nn.MSELoss(), device="cpu", rounds=3, cache=cache)
    assert order[2:] == ["fp32", "bf16"] * 3  # one warm-up each, then rounds that alternate the candidates
    assert set(choice.step_ms) == set(choice.step_ms_range) == {"fp32", "bf16"} and choice.precision in choice.reason
    assert all(low <= choice.step_ms[p] <= high for p, (low, high) in choice.step_ms_range.items())
    assert choice.cost_s > 0 and not choice.cached
    assert all(torch.equal(a, b) for a, b in zip(before, _params(model)))  # timed on a copy: the model is untouched
    order.clear()
    again = fastest_precision(model, (x, y), loss_fn=nn.MSELoss(), device="cpu", rounds=3, cache=cache)
    assert again.cached and order == [] and (again.precision, again.step_ms) == (choice.precision, choice.step_ms)
    wider = nn.Sequential(nn.Linear(5, 32), nn.Tanh(), nn.Linear(32, 1))
    assert not fastest_precision(wider, (x, y), loss_fn=nn.MSELoss(), device="cpu", rounds=1, cache=cache).cached


def test_a_choice_within_the_noise_says_so_and_keeps_fp32():
    clear = choose_precision({"fp32": [10.0, 11.0, 12.0], "bf16": [5.0, 6.0, 7.0]}, device="cpu")
    assert clear.precision == "bf16" and not clear.within_noise and "within the noise" not in clear.reason
    tied = choose_precision({"fp32": [10.0, 11.0, 15.0], "bf16": [8.0, 9.0, 16.0]}, device="cpu")  # round 3 reverses
    assert tied.precision == "fp32" and tied.within_noise and "within the noise" in tied.reason
    assert tied.step_ms == {"fp32": 11.0, "bf16": 9.0} and tied.step_ms_range["bf16"] == (8.0, 16.0)
    # overlapping ranges, yet bf16 is faster in every interleaved round: a difference, not noise
    paired = choose_precision({"fp32": [10.0, 11.0, 15.0], "bf16": [8.0, 9.0, 12.0]}, device="cpu")
    assert (
        paired.precision == "bf16" and not paired.within_noise and "each of the 3 interleaved rounds" in paired.reason
    )
    between_low = choose_precision({"fp32": [30.0, 31.0], "bf16": [8.0, 12.0], "fp16": [9.0, 11.0]}, device="cuda")
    assert between_low.precision == "bf16" and between_low.within_noise and "fp16" in between_low.reason


class TestTimingAndTies:
    """The precision choice's measurement, event by event: warm-up first, then in every round each candidate's turn
    starts its clock after a device synchronisation and stops it after another, calls alternate between candidates, and
    each value is milliseconds per call; and the choice's tie rule at touching ranges."""

    def test_each_turn_is_synchronised_before_its_clock_starts_and_before_it_stops(self, monkeypatch):
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

    def test_ranges_that_touch_overlap(self):
        low, high, apart = Spread(1.5, 1.0, 2.0), Spread(2.5, 2.0, 3.0), Spread(1.5, 1.0, 1.9)
        assert low.overlaps(high) and high.overlaps(low)
        assert not apart.overlaps(high) and not high.overlaps(apart)
        assert low.ties(high) and not apart.ties(high)  # unpaired spreads: the ratio's range is the ranges'
        touching = choose_precision({"fp32": [10.0, 12.0, 14.0], "bf16": [6.0, 8.0, 14.0]}, device="cpu")
        assert touching.precision == "fp32" and touching.within_noise  # round 3 measured them equal: a tie
        apart_each_round = choose_precision({"fp32": [10.0, 12.0, 14.0], "bf16": [6.0, 8.0, 10.0]}, device="cpu")
        assert apart_each_round.precision == "bf16" and not apart_each_round.within_noise

    def test_channels_last_reaches_the_timed_steps_and_the_cache_key(self, monkeypatch, tmp_path):
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


def _choice(precision: str = "fp32") -> PrecisionChoice:
    return PrecisionChoice(precision, {precision: 1.0}, "measured", {precision: (1.0, 1.2)}, False, 0.5)


def _save_many(path: str, prefix: str) -> None:
    for i in range(80):
        save_cached_choice(path, f"{prefix}{i}", _choice())


class TestCacheFile:
    """The precision cache is a file a user names (`cache=`): a FIFO or /dev/zero there is read as no cache, never
    blocked on or read until memory runs out; saving goes through a fresh scratch file (a link planted at its name is
    removed, never written through) under a lock, so processes saving at once keep every entry; a folder at the path is
    named."""

    @pytest.mark.timeout(60)
    def test_a_fifo_or_device_at_the_cache_is_no_cache_and_never_read(self, tmp_path):
        os.mkfifo(tmp_path / "fifo.json")
        os.symlink("/dev/zero", tmp_path / "zero.json")
        for name in ("fifo.json", "zero.json"):
            assert _within(20, lambda: load_cached_choice(tmp_path / name, "k")) is None  # noqa: B023 (called at once)
        save_cached_choice(tmp_path / "fifo.json", "k", _choice())  # the FIFO is replaced by the file, not written into
        assert load_cached_choice(tmp_path / "fifo.json", "k") == dataclasses.replace(_choice(), cached=True)

    def test_a_link_planted_at_the_scratch_name_is_not_written_through(self, tmp_path):
        (tmp_path / "victim").write_text("precious")
        os.symlink(tmp_path / "victim", tmp_path / f"c.json.{os.getpid()}.tmp")
        save_cached_choice(tmp_path / "c.json", "k", _choice())
        assert (tmp_path / "victim").read_text() == "precious"
        assert sorted(json.loads((tmp_path / "c.json").read_text())) == ["k"]

    @pytest.mark.timeout(120)
    def test_processes_saving_at_once_keep_every_entry(self, tmp_path):
        path = str(tmp_path / "c.json")
        context = multiprocessing.get_context("fork")
        writers = [context.Process(target=_save_many, args=(path, prefix)) for prefix in "abc"]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(100)
        assert all(w.exitcode == 0 for w in writers)
        assert len(json.loads((tmp_path / "c.json").read_text())) == 240

    def test_a_folder_at_the_cache_path_is_named(self, tmp_path):
        (tmp_path / "c.json").mkdir()
        with pytest.raises(IsADirectoryError, match="c.json: is a folder, where the precision cache"):
            save_cached_choice(tmp_path / "c.json", "k", _choice())
