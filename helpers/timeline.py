"""Seeing the wait: a per-step timeline of data-wait against compute, a torch.profiler trace with named ranges for
fetch, copy and step, and on CUDA the GPU's utilisation sampled with NVML while a loop runs.

Example:
    >>> loader = [(torch.randn(8, 3), torch.zeros(8))] * 4
    >>> model = torch.nn.Linear(3, 1)
    >>> rows = step_timeline(loader, lambda batch: model(batch[0]).sum().backward(), steps=3, device="cpu")
    >>> len(rows), sorted(rows[0])  # per step: when it started, seconds waiting for the batch, seconds computing
    (3, ['compute_s', 'start_s', 'wait_s'])
    >>> sorted(timeline_summary(rows))
    ['max_wait_s', 'median_compute_s', 'median_wait_s', 'steps', 'wait_fraction']

Copy with: measure.py (synchronize, to_device, and _Restarting: a loader's batches epoch after epoch) with loadmeter.py,
memory.py, pipeline_result.py and spread.py.

Needs: psutil, torch; optional: pynvml (pip install nvidia-ml-py: GPU utilisation).

The timeline synchronises the device after every copy and every step, so that each second is charged to the part
that spent it. That also stops the copy of one batch from overlapping the step of another: it shows where time
goes, it is not how to train.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from .measure import _Restarting, synchronize, to_device

TRACE_RANGES = ("fetch", "copy", "step")


def step_timeline(
    loader: Iterable, step: Callable[[Any], Any], *, steps: int, device: torch.device | str, warmup: int = 1
) -> list[dict[str, float]]:
    """Per step after `warmup`: when it started, seconds waiting for the batch (fetch and copy) and seconds of the
    step, each closed by a device synchronisation."""
    device = torch.device(device)
    source = _Restarting(loader)
    rows: list[dict[str, float]] = []
    origin = None
    for index in range(warmup + steps):
        synchronize(device)
        start = time.perf_counter()
        batch = to_device(next(source), device)
        synchronize(device)
        fed = time.perf_counter()
        step(batch)
        synchronize(device)
        done = time.perf_counter()
        if index >= warmup:
            origin = start if origin is None else origin
            rows.append({"start_s": start - origin, "wait_s": fed - start, "compute_s": done - fed})
    return rows


def timeline_summary(rows: list[dict[str, float]]) -> dict[str, float]:
    """The timeline's share of time spent waiting, its median wait and compute per step, and its worst wait."""
    wait, compute = sum(r["wait_s"] for r in rows), sum(r["compute_s"] for r in rows)
    return {
        "wait_fraction": wait / (wait + compute),
        "median_wait_s": statistics.median(r["wait_s"] for r in rows),
        "median_compute_s": statistics.median(r["compute_s"] for r in rows),
        "max_wait_s": max(r["wait_s"] for r in rows),
        "steps": len(rows),
    }


def profile_steps(
    loader: Iterable,
    step: Callable[[Any], Any],
    *,
    steps: int,
    device: torch.device | str,
    trace_path: Path,
    warmup: int = 1,
) -> dict[str, float]:
    """Run `steps` steps under torch.profiler with `record_function` ranges named fetch, copy and step; write a
    Chrome trace to `trace_path` (open it in https://ui.perfetto.dev or chrome://tracing) and return each range's
    total host milliseconds."""
    device = torch.device(device)
    # Kineto (the profiler's engine) logs every start and stop to stderr unless told otherwise; read when it starts.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    source = _Restarting(loader)
    for _ in range(warmup):
        step(to_device(next(source), device))
    synchronize(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    # one profiling cycle: acc_events keeps its events, and silences torch 2.11's warning that cycles clear them
    with profile(activities=activities, acc_events=True) as profiler:
        for _ in range(steps):
            with record_function("fetch"):
                batch = next(source)
            with record_function("copy"):
                batch = to_device(batch, device)
            with record_function("step"):
                step(batch)
        synchronize(device)
    trace_path = Path(trace_path)
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    profiler.export_chrome_trace(str(trace_path))
    totals = {event.key: event.cpu_time_total / 1e3 for event in profiler.key_averages() if event.key in TRACE_RANGES}
    return {name: totals.get(name, 0.0) for name in TRACE_RANGES}


def gpu_utilisation_unavailable(device: torch.device | str) -> str | None:
    """Why NVML's GPU utilisation cannot be sampled for `device` here ("no GPU", "NVML missing: ..."), or None when
    it can: say it instead of sampling, so a machine without NVML's Python bindings (or its library) measures the
    rest."""
    if torch.device(device).type != "cuda":
        return "no GPU on this device"
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return "NVML missing (its Python bindings: pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except pynvml.NVMLError as error:  # the bindings without the driver's libnvidia-ml
        return f"NVML missing ({error})"
    return None


def _nvml_handle(pynvml: Any, device: torch.device) -> Any:
    """NVML's handle of the CUDA device `device`, found by its UUID, else its PCI bus id: NVML numbers every GPU of
    the machine, CUDA only the visible ones in its own order (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER), so the CUDA
    ordinal is not NVML's index."""
    properties: Any = torch.cuda.get_device_properties(device)  # its type stub lacks the pci_* fields it has
    try:
        return pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{properties.uuid}")
    except pynvml.NVMLError:  # a MIG slice's UUID is not a GPU's: its GPU by bus id
        bus = f"{properties.pci_domain_id:08X}:{properties.pci_bus_id:02X}:{properties.pci_device_id:02X}.0"
        return pynvml.nvmlDeviceGetHandleByPciBusId(bus)


class GpuUtilisation:
    """A context manager that samples NVML's GPU utilisation (the percent of the last sample period in which at
    least one kernel ran) of the CUDA device `device` (a torch device or a CUDA ordinal) every `interval_s` in a
    background thread; `samples` holds the readings. gpu_utilisation_unavailable says beforehand whether it can."""

    def __init__(self, device: torch.device | str | int = 0, *, interval_s: float = 0.02) -> None:
        self.device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        self.interval_s = interval_s
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> GpuUtilisation:
        try:
            import pynvml  # nvidia-ml-py: only this class needs it
        except ImportError as error:
            raise RuntimeError("GPU utilisation needs NVML's Python bindings: pip install nvidia-ml-py") from error
        pynvml.nvmlInit()
        handle = _nvml_handle(pynvml, self.device)

        def sample() -> None:
            while not self._stop.is_set():
                self.samples.append(int(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu))
                self._stop.wait(self.interval_s)

        self._nvml = pynvml
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._nvml.nvmlShutdown()

    def mean_percent(self) -> float | None:
        """The mean of the readings (None before any)."""
        return statistics.fmean(self.samples) if self.samples else None
