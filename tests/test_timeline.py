"""Seeing the wait: the timeline charges each second to the fetch or the step with the device synchronised before
every clock read; the profiler trace names its three ranges; NVML readings are collected and averaged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

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


class _NVMLError(Exception):
    pass


def _fake_nvml(calls: list, *, uuids: dict, buses: dict, readings) -> types.SimpleNamespace:
    """pynvml as far as GpuUtilisation uses it: handles by UUID or PCI bus id only (never by NVML's index)."""

    def by(table: dict, kind: str):
        def get(key):
            calls.append((kind, key))
            if key not in table:
                raise _NVMLError(f"no GPU with {kind} {key}")
            return table[key]

        return get

    return types.SimpleNamespace(
        NVMLError=_NVMLError,
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetHandleByUUID=by(uuids, "uuid"),
        nvmlDeviceGetHandleByPciBusId=by(buses, "bus"),
        nvmlDeviceGetUtilizationRates=lambda handle: types.SimpleNamespace(
            gpu=(calls.append(("read", handle)), next(readings))[1]
        ),
    )


def _cuda_properties(monkeypatch, uuid: str = "6a3c9ad1-0000-4c5e-9f0e-1b2c3d4e5f60") -> list:
    asked: list = []

    def properties(device):
        asked.append(device)
        return types.SimpleNamespace(uuid=uuid, pci_domain_id=0, pci_bus_id=0x3B, pci_device_id=0)

    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
    return asked


def test_gpu_utilisation_samples_nvml_until_the_block_ends(monkeypatch):
    readings = iter([10, 90, 50] + [50] * 10000)
    calls: list = []
    uuid = "GPU-6a3c9ad1-0000-4c5e-9f0e-1b2c3d4e5f60"
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(calls, uuids={uuid: "gpu"}, buses={}, readings=readings))
    asked = _cuda_properties(monkeypatch)
    with GpuUtilisation(1, interval_s=0.001) as meter:
        while len(meter.samples) < 3:
            pass
        assert meter._thread is not None and meter._thread.daemon  # never keeps the interpreter alive
    assert asked == [torch.device("cuda", 1)]  # CUDA's device 1, found in NVML by its UUID, not NVML's index 1
    assert [c for c in calls if c[0] != "read"] == ["init", ("uuid", uuid), "shutdown"]
    assert {c[1] for c in calls if c[0] == "read"} == {"gpu"} and meter.samples[:3] == [10, 90, 50]
    count = len(meter.samples)
    assert meter.mean_percent() == pytest.approx(sum(meter.samples) / count)
    assert len(meter.samples) == count  # the sampler stopped with the block


def test_a_gpu_nvml_does_not_know_by_uuid_is_found_by_its_pci_bus_id(monkeypatch):
    calls: list = []
    fake = _fake_nvml(calls, uuids={}, buses={"00000000:3B:00.0": "gpu on bus 3b"}, readings=iter([7] * 10000))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    _cuda_properties(monkeypatch, uuid="MIG-a-slice")
    with GpuUtilisation(torch.device("cuda", 0), interval_s=0.001) as meter:
        while not meter.samples:
            pass
    assert ("bus", "00000000:3B:00.0") in calls and {c[1] for c in calls if c[0] == "read"} == {"gpu on bus 3b"}


def test_utilisation_that_cannot_be_sampled_says_why(monkeypatch):
    from helpers.timeline import gpu_utilisation_unavailable

    assert gpu_utilisation_unavailable("cpu") == "no GPU on this device"
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed
    assert gpu_utilisation_unavailable("cuda").startswith("NVML missing") and "nvidia-ml-py" in (
        gpu_utilisation_unavailable("cuda") or ""
    )

    def no_library():
        raise _NVMLError("NVML Shared Library Not Found")

    fake = _fake_nvml([], uuids={}, buses={}, readings=iter([]))
    fake.nvmlInit = no_library
    monkeypatch.setitem(sys.modules, "pynvml", fake)  # the bindings without the driver's library
    assert gpu_utilisation_unavailable("cuda") == "NVML missing (NVML Shared Library Not Found)"
    fake.nvmlInit = lambda: None
    assert gpu_utilisation_unavailable("cuda:0") is None


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


def test_the_timeline_syncs_the_given_device_hands_the_step_its_batch_and_warms_up_one_step(monkeypatch):
    synced, stepped = [], []
    monkeypatch.setattr(timeline, "synchronize", lambda device: synced.append(device))
    batches = [torch.full((2,), float(i)) for i in range(3)]
    rows = step_timeline(batches, lambda batch: stepped.append(batch), steps=4, device="meta")  # default warmup
    assert len(rows) == 4 and len(stepped) == 5  # one warm-up step, not timed
    assert all(batch.device.type == "meta" for batch in stepped)  # the batch was moved to the device first
    assert synced and all(device == torch.device("meta") for device in synced)


def test_the_summary_reports_medians_and_the_step_count():
    rows = [{"start_s": 0.0, "wait_s": w, "compute_s": c} for w, c in [(1.0, 4.0), (3.0, 2.0), (8.0, 3.0)]]
    summary = timeline_summary(rows)
    assert summary == {
        "wait_fraction": pytest.approx(12 / 21),
        "median_wait_s": 3.0,
        "median_compute_s": 3.0,
        "max_wait_s": 8.0,
        "steps": 3,
    }


def test_profile_steps_profiles_the_device_it_runs_on(monkeypatch, tmp_path):
    """A CUDA run asks the profiler for CUDA activity too and keeps every event; batches go to that device; the
    warm-up step runs outside the profile (stand-ins for the profiler and the copy, so it runs on a CPU)."""
    asked, moved, steps_seen = {}, [], []

    class FakeProfile:
        def __init__(self, **kwargs):
            asked.update(kwargs)

        def __enter__(self):
            asked["entered_after_steps"] = len(steps_seen)
            return self

        def __exit__(self, *exc):
            return False

        def export_chrome_trace(self, path):
            Path(path).write_text("{}")

        def key_averages(self):
            return [types.SimpleNamespace(key="step", cpu_time_total=2500.0)]  # microseconds

    monkeypatch.setattr(timeline, "profile", FakeProfile)
    monkeypatch.setattr(timeline, "synchronize", lambda device: None)
    monkeypatch.setattr(timeline, "to_device", lambda batch, device: moved.append(device) or batch)
    trace = tmp_path / "not" / "yet" / "there" / "trace.json"
    totals = profile_steps([torch.ones(1)], steps_seen.append, steps=3, device="cuda:0", trace_path=trace)
    assert asked["activities"] == [timeline.ProfilerActivity.CPU, timeline.ProfilerActivity.CUDA]
    assert asked["acc_events"] is True and asked["entered_after_steps"] == 1  # the default warm-up: one step
    assert len(steps_seen) == 4 and moved == [torch.device("cuda:0")] * 4
    assert trace.exists()  # its folders were made
    assert totals == {"fetch": 0.0, "copy": 0.0, "step": 2.5}  # milliseconds; a range with no events reads 0


def test_profile_steps_on_the_cpu_asks_for_cpu_activity_only(monkeypatch, tmp_path):
    asked = {}
    real_profile = timeline.profile

    def recording_profile(**kwargs):
        asked.update(kwargs)
        return real_profile(**kwargs)

    monkeypatch.setattr(timeline, "profile", recording_profile)
    profile_steps([torch.ones(2)], lambda x: x.sum(), steps=1, device="cpu", trace_path=tmp_path / "t.json")
    assert asked["activities"] == [timeline.ProfilerActivity.CPU]


def test_profile_totals_are_milliseconds_of_each_range(tmp_path):
    def step(batch):
        time.sleep(0.02)

    totals = profile_steps([torch.ones(1)], step, steps=3, device="cpu", trace_path=tmp_path / "t.json", warmup=0)
    assert 55 <= totals["step"] < 10_000  # three 20 ms sleeps, in milliseconds (not seconds, not microseconds)
