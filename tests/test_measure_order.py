"""measure.py with a scripted clock: a fed step's compute time is read only after the step's work is synchronised,
time_batches' rate is samples over seconds, the efficiency is the median of the per-pair ratios fed / pre-made, and
drain() draws what the loader's workers hold ready."""

from __future__ import annotations

import statistics

import pytest
import torch

import helpers.measure as measure
from helpers.measure import PipelineProbe, time_batches


class _Script:
    """A clock that moves only when the step runs (by `cost` seconds), recording clock, sync, batch and step."""

    def __init__(self, monkeypatch) -> None:
        self.now, self.cost, self.events = 0.0, 1.0, []
        monkeypatch.setattr(measure, "clock", self.clock)
        monkeypatch.setattr(measure, "synchronize", lambda device: self.events.append("sync"))
        monkeypatch.setattr(measure, "synchronize_stream", lambda device: self.events.append("sync"))

    def clock(self) -> float:
        self.events.append("clock")
        return self.now

    def loader(self):
        while True:
            self.events.append("batch")
            yield torch.zeros(2, 3), torch.zeros(2, 1)

    def step(self, batch) -> None:
        self.events.append("step")
        self.now += self.cost


def test_a_fed_steps_compute_is_read_after_a_synchronisation(monkeypatch):
    script = _Script(monkeypatch)
    probe = PipelineProbe(script.loader(), script.step, torch.device("cpu"), premade=1, warmup=1)
    script.events.clear()
    probe.fed_block(3)
    events = script.events
    for i in [i for i, e in enumerate(events) if e == "step"]:
        following = events[i + 1 :]
        assert "sync" in following and following.index("sync") < following.index("clock"), events


def test_between_steps_only_the_current_stream_is_waited_for(monkeypatch):
    # issue 30: a device-wide synchronisation after fetching a PrefetchLoader's batch also waits for its side
    # stream's copy of the next one, which the real loop overlaps with the step, and charges it as data-wait
    events = []
    monkeypatch.setattr(measure, "synchronize", lambda device: events.append("device"))
    monkeypatch.setattr(measure, "synchronize_stream", lambda device: events.append("stream"))
    loader = iter(lambda: (torch.zeros(2, 3), torch.zeros(2, 1)), None)
    probe = PipelineProbe(loader, lambda batch: events.append("step"), torch.device("cpu"), premade=1, warmup=1)
    for block in (lambda: probe.fed_block(3), lambda: probe.premade_block(3)):
        events.clear()
        block()
        assert events[0] == "device" and events[-1] == "device", events  # the block's own boundaries: everything
        inside = events[1:-1]
        assert "device" not in inside and inside.count("stream") >= 3, events  # between steps: the stream only


def test_time_batches_rate_is_samples_over_seconds(monkeypatch):
    ticks = iter([10.0, 14.0])
    monkeypatch.setattr(measure, "clock", lambda: next(ticks))
    result = time_batches(iter([torch.zeros(2, 3)] * 4), 3, warmup=1)
    assert result["samples"] == 6 and result["seconds"] == 4.0
    assert result["samples_per_s"] == pytest.approx(1.5)


def test_the_efficiency_is_the_median_pair_ratio_fed_over_premade(monkeypatch):
    script = _Script(monkeypatch)
    probe = PipelineProbe(script.loader(), script.step, torch.device("cpu"), premade=2, warmup=1)
    for fed_cost in (1.0, 2.0, 4.0):  # fed steps 1x, 2x and 4x as slow as pre-made ones: ratios 1, 1/2, 1/4
        script.cost = fed_cost
        probe.fed_block(2)
        script.cost = 1.0
        probe.premade_block(3)  # another length: the rates, not the counts, are compared
    result = probe.result()
    assert result.pipeline_efficiency == pytest.approx(statistics.median([1.0, 0.5, 0.25]))
    assert result.efficiency_range == pytest.approx((0.25, 1.0))
    assert result.fed_samples_per_s == pytest.approx(12 / 14)  # 6 steps of 2 samples in 2 + 4 + 8 seconds
    assert result.premade_samples_per_s == pytest.approx(2.0)


class _Workers:
    """A loader that says it has workers holding batches ready, and counts its draws."""

    num_workers, prefetch_factor = 3, 2

    def __init__(self) -> None:
        self.draws = 0

    def __iter__(self):
        while True:
            self.draws += 1
            yield torch.zeros(2, 3)


def test_drain_draws_what_the_workers_hold_ready(monkeypatch):
    monkeypatch.setattr(measure, "synchronize", lambda device: None)
    loader = _Workers()
    probe = PipelineProbe(loader, lambda batch: None, torch.device("cpu"), premade=1, warmup=1)
    before = loader.draws
    probe.drain()
    assert loader.draws - before == 6  # 3 workers x 2 batches each
    probe.drain(2)
    assert loader.draws - before == 8


def test_seconds_per_call_synchronises_the_current_cuda_device_by_default(monkeypatch):
    synced = []
    monkeypatch.setattr(measure, "synchronize", synced.append)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    measure.seconds_per_call(lambda: None, calls=2, warmup=0)
    assert synced == [torch.device("cuda", 0)] * 4  # before and after each timed call


class _ReadyAhead:
    """A loader whose thread (or workers) holds `ahead` batches ready: it says so in `batches_ahead`."""

    def __init__(self, ahead: int, events: list) -> None:
        self.batches_ahead, self.events = ahead, events

    def __iter__(self):
        while True:
            self.events.append("batch")
            yield torch.zeros(2, 3)


def test_time_batches_draws_what_a_loader_holds_ready_before_its_clock_starts(monkeypatch):
    """04's loader-alone rows: CachedCropLoader on CUDA holds 3 batches ready (its thread's queue of 2 and the one
    in its hand), made during the warm-up; timed, they would count as instant."""
    events: list[str] = []
    ticks = iter(range(100))
    monkeypatch.setattr(measure, "clock", lambda: events.append("clock") or float(next(ticks)))
    time_batches(_ReadyAhead(3, events), 4, warmup=2)
    first_clock = events.index("clock")
    assert events[:first_clock].count("batch") == 2 + 3
    assert events[first_clock:].count("batch") == 4


def test_the_probe_drains_what_a_loaders_thread_holds_ready(monkeypatch):
    script = _Script(monkeypatch)
    probe = PipelineProbe(_ReadyAhead(3, script.events), lambda batch: None, torch.device("cpu"), premade=1, warmup=1)
    script.events.clear()
    probe.drain()
    assert script.events.count("batch") == 3


def test_the_loaders_say_how_many_batches_they_hold_ready():
    from torch.utils.data import DataLoader

    from helpers.measure import batches_ahead
    from helpers.prefetch import BackgroundPrefetcher
    from helpers.sr_cache import CachedCropLoader

    cache = type("Cache", (), {"__len__": lambda self: 4})()
    assert CachedCropLoader(cache, batch_size=2, device="cuda").batches_ahead == 3  # prefetch 2 there by default
    assert CachedCropLoader(cache, batch_size=2, device="cuda", prefetch=4).batches_ahead == 5
    assert CachedCropLoader(cache, batch_size=2).batches_ahead == 0  # no thread on the CPU
    assert batches_ahead(BackgroundPrefetcher([], depth=2)) == 3
    assert batches_ahead(DataLoader(range(8), num_workers=3, prefetch_factor=2)) == 6
    assert batches_ahead(DataLoader(range(8))) == 0 and batches_ahead([1, 2]) == 0
