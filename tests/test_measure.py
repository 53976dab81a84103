"""The measuring instruments: pipeline efficiency, data-wait, peak memory (the doctor's verdicts: test_doctor.py)."""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest
import torch
from torch import nn

import helpers.measure as measure
from helpers.measure import (
    PipelineProbe,
    measure_pipeline,
    measure_pipelines,
    peak_rss_bytes,
    reset_peak_rss,
    time_batches,
)


class SlowLoader:
    """Batches that take `delay` seconds each to produce: an input-bound pipeline by construction."""

    def __init__(self, delay: float, batches: int = 4) -> None:
        self.delay, self.batches = delay, batches

    def __iter__(self):
        for _ in range(self.batches):
            time.sleep(self.delay)
            yield torch.zeros(4, 3), torch.zeros(4, 1)


def _step():
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(batch):
        x, y = batch
        optimizer.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()

    return step


def test_a_sleeping_loader_shows_its_wait():
    result = measure_pipeline(SlowLoader(0.02), _step(), torch.device("cpu"), steps_per_block=3, blocks=2)
    assert result.steps == 6 and result.data_wait_ms >= 15  # it slept 20 ms per batch
    assert result.pipeline_efficiency < 0.5  # a tiny step cannot hide 20 ms of waiting


class BurstyLoader:
    """One batch in four takes 40 ms (a worker's turn), the others are ready at once."""

    def __iter__(self):
        for i in range(8):
            time.sleep(0.04 if i % 4 == 3 else 0.0)
            yield torch.zeros(4, 3), torch.zeros(4, 1)


def test_the_wait_is_a_mean_per_step_so_wait_and_compute_add_up_to_the_fed_step():
    result = measure_pipeline(BurstyLoader(), _step(), torch.device("cpu"), steps_per_block=8, blocks=2)
    assert result.data_wait_ms >= 9.5  # 40 ms every fourth step; a median per step would read about 0
    fed_step_ms = 1000 * 4 / result.fed_samples_per_s
    assert 0.8 * fed_step_ms <= result.data_wait_ms + result.compute_ms <= fed_step_ms


def test_pipelines_measured_side_by_side_keep_their_names_ranges_and_data_wait():
    results = measure_pipelines(
        {"slow": (SlowLoader(0.02), _step()), "ready": (SlowLoader(0.0), _step())},
        torch.device("cpu"),
        budget_s=0.6,
        blocks=3,
    )
    slow, ready = results["slow"], results["ready"]
    assert list(results) == ["slow", "ready"]
    assert slow.data_wait_ms >= 15 and ready.data_wait_ms < 5  # the 20 ms delay shows up only where it is
    low, high = slow.fed_samples_per_s_range
    assert low <= high and slow.efficiency_range is not None and slow.pipeline_efficiency < 0.5


def test_the_undisturbed_step_time_is_measured():
    result = measure_pipeline(SlowLoader(0.0), _step(), torch.device("cpu"), steps_per_block=3, blocks=2)
    assert result.premade_step_ms is not None and 0 < result.premade_step_ms < 1000


def test_peak_rss_sees_a_large_allocation():
    reset_peak_rss()
    before = peak_rss_bytes()
    block = np.ones(200 * 2**20, dtype=np.uint8)  # 200 MiB, touched
    after = peak_rss_bytes()
    assert before is not None and after - before > 150 * 2**20
    del block


def test_steps_in_budget_and_seconds_per_call():
    from helpers.measure import seconds_per_call, steps_in_budget

    assert steps_in_budget(10, 0.3) == 33 and steps_in_budget(1, 5) == 1 and steps_in_budget(10, 0.1, maximum=50) == 50
    assert 0.015 <= seconds_per_call(lambda: time.sleep(0.02), calls=2) < 0.5


# --- the order of synchronisation and clock reads: every block's clock stops after its device synchronisation ---


class _Recorder:
    """Stands in for helpers.measure's clock and synchronize, and records them with the loader's and step's calls."""

    def __init__(self, monkeypatch):
        import helpers.measure as measure

        self.events, self.now = [], 0.0
        monkeypatch.setattr(measure, "clock", self.clock)
        monkeypatch.setattr(measure, "synchronize", self.sync)
        monkeypatch.setattr(measure, "synchronize_stream", self.sync)

    def clock(self):
        self.now += 1.0
        self.events.append("clock")
        return self.now

    def sync(self, device):
        self.events.append("sync")

    def loader(self):
        while True:
            self.events.append("batch")
            yield torch.zeros(2, 3), torch.zeros(2, 1)

    def step(self, batch):
        self.events.append("step")

    def block(self, run):
        """The events of one call of `run()`."""
        self.events.clear()
        run()
        return list(self.events)


def _ends_with_sync_then_clock(events, work):
    last_work = max(i for i, e in enumerate(events) if e in work)
    tail = events[last_work + 1 :]
    return events[-2:] == ["sync", "clock"] and "sync" in tail and tail.index("sync") < len(tail) - 1


def test_every_probe_block_starts_and_ends_with_a_synchronisation_before_its_clock(monkeypatch):
    from helpers.measure import PipelineProbe

    rec = _Recorder(monkeypatch)
    probe = PipelineProbe(rec.loader(), rec.step, torch.device("cpu"), premade=2, warmup=1)
    for run, work in (
        (lambda: probe.loader_block(3), {"batch"}),
        (lambda: probe.fed_block(3), {"batch", "step"}),
        (lambda: probe.premade_block(3), {"step"}),
    ):
        events = rec.block(run)
        assert events[:2] == ["sync", "clock"], events  # queued work from before is not this block's
        assert _ends_with_sync_then_clock(events, work), events


def test_fed_and_premade_blocks_synchronise_after_every_step_alike(monkeypatch):
    from helpers.measure import PipelineProbe

    rec = _Recorder(monkeypatch)
    probe = PipelineProbe(rec.loader(), rec.step, torch.device("cpu"), premade=2, warmup=1)
    for run in (lambda: probe.fed_block(4), lambda: probe.premade_block(4)):
        events = [e for e in rec.block(run) if e in ("step", "sync")]
        steps = [i for i, e in enumerate(events) if e == "step"]
        assert len(steps) == 4 and all(events[i + 1] == "sync" for i in steps), events
    fed = rec.block(lambda: probe.fed_block(1))
    assert fed.index("sync", fed.index("batch")) < fed.index("step")  # the copy has landed before compute starts


def test_time_batches_and_seconds_per_call_stop_their_clock_after_a_synchronisation(monkeypatch):
    from helpers.measure import seconds_per_call, time_batches

    rec = _Recorder(monkeypatch)
    events = rec.block(lambda: time_batches(rec.loader(), 3, warmup=1))
    assert _ends_with_sync_then_clock(events, {"batch"}), events
    assert events[events.index("clock") - 1] == "sync"  # the warm-up's queued work ends before the clock starts
    events = rec.block(lambda: seconds_per_call(lambda: rec.step(None), calls=2, warmup=0, device=torch.device("cpu")))
    assert events == ["sync", "clock", "step", "sync", "clock"] * 2, events


def test_a_probe_result_carries_ranges_for_each_side_and_the_load_reading():
    result = measure_pipeline(SlowLoader(0.0, batches=50), _step(), torch.device("cpu"), steps_per_block=3, blocks=3)
    for name in (
        "efficiency_range",
        "fed_samples_per_s_range",
        "premade_samples_per_s_range",
        "data_wait_ms_range",
        "compute_ms_range",
    ):
        low, high = getattr(result, name)
        assert low <= high, name
    assert result.fed_samples_per_s_range[0] <= result.fed_samples_per_s <= result.fed_samples_per_s_range[1]
    assert result.load is not None and result.load.cores >= 1 and result.load.other_cores >= 0
    assert result.samples_per_s == result.fed_samples_per_s  # the old name reads the same number


def test_pause_stops_the_workers_and_the_next_draw_restarts_them():
    import psutil
    from torch.utils.data import DataLoader, TensorDataset

    from helpers.measure import PipelineProbe

    data = TensorDataset(torch.zeros(64, 3), torch.zeros(64, 1))
    earlier = {c.pid for c in psutil.Process().children(recursive=True)}  # left by other tests: not this probe's
    loader = DataLoader(data, batch_size=4, num_workers=1, persistent_workers=True)
    probe = PipelineProbe(loader, _step(), torch.device("cpu"), premade=1, warmup=1)

    def workers():
        return [
            c
            for c in psutil.Process().children()
            if c.pid not in earlier and c.is_running() and c.status() != psutil.STATUS_ZOMBIE
        ]

    assert len(workers()) == 1
    probe.pause()
    assert workers() == []
    probe.drain()
    assert len(workers()) == 1 and probe.fed_block(2) > 0
    probe.pause()


def test_pipelines_side_by_side_keep_only_the_current_pipelines_workers_alive():
    import psutil
    from torch.utils.data import DataLoader, TensorDataset

    seen = []
    earlier = {c.pid for c in psutil.Process().children(recursive=True)}  # left by other tests: not these loaders'

    def loader():
        return DataLoader(
            TensorDataset(torch.zeros(64, 3), torch.zeros(64, 1)), batch_size=4, num_workers=1, persistent_workers=True
        )

    def step(batch):
        alive = [c for c in psutil.Process().children() if c.pid not in earlier and c.status() != psutil.STATUS_ZOMBIE]
        seen.append(len(alive))

    measure_pipelines({"a": (loader(), step), "b": (loader(), step)}, torch.device("cpu"), budget_s=0.2, blocks=2)
    assert max(seen) == 1  # warm-up, calibration and blocks: one pipeline's worker, never both


def test_no_worker_runs_while_a_premade_block_is_timed_so_the_baseline_is_the_steps_own(monkeypatch):
    import psutil
    from torch.utils.data import DataLoader, TensorDataset

    from helpers.measure import PipelineProbe

    earlier = {c.pid for c in psutil.Process().children(recursive=True)}  # left by other tests: not this loader's
    in_premade, seen = [False], {True: [], False: []}
    timed = PipelineProbe.premade_block

    def premade_block(self, steps):
        in_premade[0] = True
        try:
            return timed(self, steps)
        finally:
            in_premade[0] = False

    def step(batch):
        alive = [c for c in psutil.Process().children() if c.pid not in earlier and c.status() != psutil.STATUS_ZOMBIE]
        seen[in_premade[0]].append(len(alive))

    monkeypatch.setattr(PipelineProbe, "premade_block", premade_block)
    data = TensorDataset(torch.zeros(64, 3), torch.zeros(64, 1))
    loader = DataLoader(data, batch_size=4, num_workers=1, persistent_workers=True)
    measure_pipeline(loader, step, torch.device("cpu"), steps_per_block=3, blocks=2)
    assert seen[True] and set(seen[True]) == {0}  # workers would refill their queue during the baseline
    assert 1 in seen[False]  # the fed blocks had their worker


class SimulatedAllocator:
    """CUDA's allocated-bytes and peak counters, stood in for on a CPU: `allocate(n)` holds n more bytes (a negative
    n frees them); the readings and the reset are what helpers.memory's CUDA functions would return and do."""

    def __init__(self, monkeypatch, *modules) -> None:
        self.allocated = self.peak = 0
        for module in modules:
            monkeypatch.setattr(module, "allocated_device_memory_bytes", lambda device: self.allocated, raising=False)
            monkeypatch.setattr(module, "peak_device_memory_bytes", lambda device: self.peak, raising=False)
            monkeypatch.setattr(module, "reset_peak_device_memory", self.reset, raising=False)

    def allocate(self, count: int) -> None:
        self.allocated += count
        self.peak = max(self.peak, self.allocated)

    def reset(self, device=None) -> None:
        self.peak = self.allocated


def test_each_block_reads_its_own_peak_device_memory_not_the_processs(monkeypatch):
    """The peak counter is reset as each block starts: a peak reached before (a batch search) is not the block's,
    and what a step allocates and frees again is counted above what was held when the block started."""
    from helpers import measure
    from helpers.measure import PipelineProbe

    memory = SimulatedAllocator(monkeypatch, measure)
    memory.allocate(1000)  # held before the probe
    memory.allocate(9000)
    memory.allocate(-9000)  # an earlier peak of 10,000 bytes, freed
    step_bytes = {"now": 50}

    def step(batch):
        memory.allocate(step_bytes["now"])  # activations, gradients: freed by the end of the step
        memory.allocate(-step_bytes["now"])

    probe = PipelineProbe([(torch.zeros(4, 3), torch.zeros(4, 1))] * 2, step, torch.device("cpu"), premade=1)
    assert probe.peak_above_start_bytes() is None  # no block yet
    for size in (300, 700, 200):  # fed, pre-made, fed
        step_bytes["now"] = size
        (probe.fed_block if size != 700 else probe.premade_block)(2)
    probe.premade_block(1)
    assert probe.peak_above_start_bytes() == 700
    assert probe.result().peak_device_mib == (1000 + 700) / 2**20  # the blocks' highest peak, not 10,000 bytes
    probe.forget()
    assert probe.peak_above_start_bytes() is None  # forgotten with the blocks (a calibration pair's)


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


class _Workers:
    """A loader that says it has workers holding batches ready, and counts its draws."""

    num_workers, prefetch_factor = 3, 2

    def __init__(self) -> None:
        self.draws = 0

    def __iter__(self):
        while True:
            self.draws += 1
            yield torch.zeros(2, 3)


class _ReadyAhead:
    """A loader whose thread (or workers) holds `ahead` batches ready: it says so in `batches_ahead`."""

    def __init__(self, ahead: int, events: list) -> None:
        self.batches_ahead, self.events = ahead, events

    def __iter__(self):
        while True:
            self.events.append("batch")
            yield torch.zeros(2, 3)


class TestScriptedClock:
    """measure.py with a scripted clock: a fed step's compute time is read only after the step's work is synchronised,
    time_batches' rate is samples over seconds, the efficiency is the median of the per-pair ratios fed / pre-made, and
    drain() draws what the loader's workers hold ready."""

    def test_a_fed_steps_compute_is_read_after_a_synchronisation(self, monkeypatch):
        script = _Script(monkeypatch)
        probe = PipelineProbe(script.loader(), script.step, torch.device("cpu"), premade=1, warmup=1)
        script.events.clear()
        probe.fed_block(3)
        events = script.events
        for i in [i for i, e in enumerate(events) if e == "step"]:
            following = events[i + 1 :]
            assert "sync" in following and following.index("sync") < following.index("clock"), events

    def test_between_steps_only_the_current_stream_is_waited_for(self, monkeypatch):
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

    def test_time_batches_rate_is_samples_over_seconds(self, monkeypatch):
        ticks = iter([10.0, 14.0])
        monkeypatch.setattr(measure, "clock", lambda: next(ticks))
        result = time_batches(iter([torch.zeros(2, 3)] * 4), 3, warmup=1)
        assert result["samples"] == 6 and result["seconds"] == 4.0
        assert result["samples_per_s"] == pytest.approx(1.5)

    def test_the_efficiency_is_the_median_pair_ratio_fed_over_premade(self, monkeypatch):
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

    def test_drain_draws_what_the_workers_hold_ready(self, monkeypatch):
        monkeypatch.setattr(measure, "synchronize", lambda device: None)
        loader = _Workers()
        probe = PipelineProbe(loader, lambda batch: None, torch.device("cpu"), premade=1, warmup=1)
        before = loader.draws
        probe.drain()
        assert loader.draws - before == 6  # 3 workers x 2 batches each
        probe.drain(2)
        assert loader.draws - before == 8

    def test_seconds_per_call_synchronises_the_current_cuda_device_by_default(self, monkeypatch):
        synced = []
        monkeypatch.setattr(measure, "synchronize", synced.append)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        measure.seconds_per_call(lambda: None, calls=2, warmup=0)
        assert synced == [torch.device("cuda", 0)] * 4  # before and after each timed call

    def test_time_batches_draws_what_a_loader_holds_ready_before_its_clock_starts(self, monkeypatch):
        """04's loader-alone rows: CachedCropLoader on CUDA holds 3 batches ready (its thread's queue of 2 and the one
        in its hand), made during the warm-up; timed, they would count as instant."""
        events: list[str] = []
        ticks = iter(range(100))
        monkeypatch.setattr(measure, "clock", lambda: events.append("clock") or float(next(ticks)))
        time_batches(_ReadyAhead(3, events), 4, warmup=2)
        first_clock = events.index("clock")
        assert events[:first_clock].count("batch") == 2 + 3
        assert events[first_clock:].count("batch") == 4

    def test_the_probe_drains_what_a_loaders_thread_holds_ready(self, monkeypatch):
        script = _Script(monkeypatch)
        probe = PipelineProbe(
            _ReadyAhead(3, script.events), lambda batch: None, torch.device("cpu"), premade=1, warmup=1
        )
        script.events.clear()
        probe.drain()
        assert script.events.count("batch") == 3

    def test_the_loaders_say_how_many_batches_they_hold_ready(self):
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
