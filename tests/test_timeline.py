"""Seeing the wait: the timeline charges each second to the fetch or the step with the device synchronised before
every clock read; the profiler trace names its three ranges; NVML readings are collected and averaged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest
import torch

from helpers import timeline
from helpers.timeline import GpuUtilisation, profile_steps, step_timeline, timeline_summary


class FakeClock:
    def __init__(self, events):
        self.now, self.events = 0.0, events

    def perf_counter(self):
        self.events.append("clock")
        return self.now


def test_timeline_charges_fetch_and_step_and_syncs_before_every_clock_read(monkeypatch):
    events: list[str] = []
    clock = FakeClock(events)
    monkeypatch.setattr(timeline.time, "perf_counter", clock.perf_counter)
    monkeypatch.setattr(timeline, "synchronize", lambda device: events.append("sync"))

    class Loader:
        def __iter__(self):
            for i in range(2):  # a 2-batch epoch: the timeline starts a new one as needed
                clock.now += 3.0 if i == 0 else 7.0
                yield torch.zeros(2, 1)

    def step(batch):
        clock.now += 5.0

    rows = step_timeline(Loader(), step, steps=4, device="cpu", warmup=1)
    assert [r["wait_s"] for r in rows] == [7.0, 3.0, 7.0, 3.0]
    assert all(r["compute_s"] == 5.0 for r in rows)
    assert [r["start_s"] for r in rows] == [0.0, 12.0, 20.0, 32.0]
    assert all(events[i - 1] == "sync" for i, e in enumerate(events) if e == "clock")
    summary = timeline_summary(rows)
    assert summary["wait_fraction"] == pytest.approx(20 / 40) and summary["max_wait_s"] == 7.0


def test_empty_loader_is_an_error():
    with pytest.raises(ValueError, match="no batch"):
        step_timeline([], lambda b: None, steps=1, device="cpu")


def test_profile_trace_names_fetch_copy_and_step(tmp_path):
    loader = [torch.randn(4, 8) for _ in range(3)]
    weight = torch.randn(8, 8)
    totals = profile_steps(loader, lambda x: (x @ weight).sum(), steps=4, device="cpu", trace_path=tmp_path / "t.json")
    assert set(totals) == {"fetch", "copy", "step"} and totals["step"] > 0
    names = {event.get("name") for event in json.loads((tmp_path / "t.json").read_text())["traceEvents"]}
    assert {"fetch", "copy", "step"} <= names


def test_gpu_utilisation_samples_nvml_until_the_block_ends(monkeypatch):
    readings = iter([10, 90, 50] + [50] * 1000)
    calls = []
    fake = types.SimpleNamespace(
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetHandleByIndex=lambda index: ("handle", index),
        nvmlDeviceGetUtilizationRates=lambda handle: types.SimpleNamespace(gpu=next(readings)),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with GpuUtilisation(0, interval_s=0.001) as meter:
        while len(meter.samples) < 3:
            pass
    assert calls == ["init", "shutdown"] and meter.samples[:3] == [10, 90, 50]
    count = len(meter.samples)
    assert meter.mean_percent() == pytest.approx(sum(meter.samples) / count)
    assert len(meter.samples) == count  # the sampler stopped with the block


def test_gpu_utilisation_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(RuntimeError, match="nvidia-ml-py"), GpuUtilisation():
        pass


def test_profiler_run_prints_nothing_to_stderr(tmp_path):
    """A notebook output stays clean: Kineto's start/stop log lines are silenced (plant: drop the setdefault)."""
    code = (
        "import torch, pathlib; from helpers.timeline import profile_steps; "
        "profile_steps([torch.ones(2, 2)], lambda x: x.sum(), steps=2, device='cpu', "
        f"trace_path=pathlib.Path({str(tmp_path / 't.json')!r}))"
    )
    env = {key: value for key, value in os.environ.items() if key != "KINETO_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "", done.stderr
