"""Measuring an input pipeline: loader throughput, data-wait against compute, pipeline efficiency, peak memory (the
pipeline doctor that turns those numbers into a verdict and what to try next is doctor.py).

Copy alone: needs only torch.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

try:
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]


# --- timing ---


def count_samples(batch: Any) -> int:
    """The number of samples in a batch (the first dimension of its first tensor)."""
    while isinstance(batch, (list, tuple)):
        batch = batch[0]
    return int(batch.shape[0])


class _Restarting:
    """An endless iterator over a loader: starts a new epoch when one ends."""

    def __init__(self, loader: Iterable) -> None:
        self.loader, self.iterator = loader, iter(loader)

    def __next__(self) -> Any:
        try:
            return next(self.iterator)
        except StopIteration:
            self.iterator = iter(self.loader)
            return next(self.iterator)


def time_batches(loader: Iterable, batches: int, *, warmup: int = 1) -> dict[str, float]:
    """Iterate `warmup` then `batches` batches (restarting the loader as needed); return samples/s and seconds."""
    source = _Restarting(loader)
    for _ in range(warmup):
        next(source)
    samples = 0
    start = time.perf_counter()
    for _ in range(batches):
        samples += count_samples(next(source))
    seconds = time.perf_counter() - start
    return {"samples_per_s": samples / seconds, "seconds": seconds, "samples": samples}


def seconds_per_call(
    fn: Callable[[], Any], *, calls: int = 3, warmup: int = 1, device: torch.device | None = None
) -> float:
    """Median wall seconds of `fn()` over `calls` timed calls after `warmup` untimed ones (queued device work included)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(calls):
        if device is not None:
            synchronize(device)
        start = time.perf_counter()
        fn()
        if device is not None:
            synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def steps_in_budget(budget_s: float, seconds_per_step: float, *, minimum: int = 1, maximum: int | None = None) -> int:
    """How many steps of `seconds_per_step` fit in `budget_s`, at least `minimum` and at most `maximum`."""
    steps = max(minimum, int(budget_s / max(seconds_per_step, 1e-9)))
    return steps if maximum is None else min(steps, maximum)


# --- memory ---


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set size (Linux: /proc/self/clear_refs); False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _proc_bytes(path: str, key: str) -> int | None:
    """The `key:` line of a Linux /proc file that counts kB (VmRSS, MemAvailable, ...), in bytes; None where absent."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(f"{key}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss_bytes() -> int | None:
    """This process's peak resident set size since start or the last reset, in bytes (None where unknown)."""
    peak = _proc_bytes("/proc/self/status", "VmHWM")
    if peak is not None:
        return peak
    if resource is None:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def reset_peak_device_memory(device: torch.device) -> None:
    """Reset CUDA's peak-allocation counter (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_device_memory_bytes(device: torch.device) -> int | None:
    """Peak bytes allocated on a CUDA device since the last reset (None on CPU)."""
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so host timers measure it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def current_rss_bytes() -> int | None:
    """This process's resident set size now, in bytes (None where unknown)."""
    return _proc_bytes("/proc/self/status", "VmRSS")


def free_memory_bytes(device: torch.device) -> int | None:
    """Memory free for new tensors: the CUDA device's free bytes, or the machine's available RAM (Linux) on a CPU."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return _proc_bytes("/proc/meminfo", "MemAvailable")


# --- a loader alone ---


def measure_loader(loader: Iterable, batches: int, *, warmup: int = 1) -> dict[str, Any]:
    """Samples/s of a loader on its own (no model), with this process's peak RSS during the run."""
    reset_peak_rss()
    result = time_batches(loader, batches, warmup=warmup)
    result["peak_rss_mib"] = (peak_rss_bytes() or 0) / 2**20
    return result


# --- a loader feeding a model ---


def to_device(batch: Any, device: torch.device) -> Any:
    """Move a tensor, or a list/tuple of tensors, to `device` (non-blocking from pinned memory)."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    return type(batch)(to_device(item, device) for item in batch)


@dataclass
class PipelineResult:
    """A loader feeding a model, against the same model on pre-made device batches, measured interleaved."""

    samples_per_s: float  # fed: the loader feeding the step, end to end
    ideal_samples_per_s: float  # the same step on batches already on the device: what a perfect loader would give
    pipeline_efficiency: float  # median over block pairs of fed / pre-made throughput (1.0: the model never waits)
    data_wait_ms: float  # median per fed step: getting the next batch onto the device
    compute_ms: float  # median per fed step: the step itself
    steps: int
    peak_rss_mib: float
    peak_device_mib: float | None
    efficiency_range: tuple[float, float] | None = None  # lowest and highest block-pair ratio: the spread
    samples_per_s_range: tuple[float, float] | None = None  # lowest and highest fed block's samples/s
    premade_step_ms: float | None = None  # median over pre-made blocks of their time per step: the step undisturbed

    @property
    def data_wait_fraction(self) -> float:
        """Share of a fed step spent waiting for data."""
        return self.data_wait_ms / max(self.data_wait_ms + self.compute_ms, 1e-12)


class PipelineProbe:
    """One loader feeding one training step, measured in blocks that the caller interleaves as it likes: the loader
    alone, steps fed by the loader (each split into data-wait and compute), and steps on pre-made device batches.

    Interleaving fed and pre-made blocks (and, across several probes, rungs) means a burst of load on the machine
    hits every variant alike instead of deciding one ratio.
    """

    def __init__(
        self, loader: Iterable, step: Callable[[Any], Any], device: torch.device, *, premade: int = 4, warmup: int = 2
    ) -> None:
        self.step, self.device = step, torch.device(device)
        self.source = _Restarting(loader)
        self.batches = [to_device(next(self.source), self.device) for _ in range(premade)]
        for i in range(warmup):  # kernel selection, allocator, worker start-up: never timed
            step(to_device(next(self.source), self.device))
            step(self.batches[i % premade])
        synchronize(self.device)
        self.waits: list[float] = []
        self.computes: list[float] = []
        self.alone: list[tuple[float, int]] = []  # (seconds, samples) per block of each kind
        self.fed: list[tuple[float, int]] = []
        self.ideal: list[tuple[float, int]] = []
        self.premade_steps: list[float] = []  # seconds per step of each pre-made block

    def loader_block(self, batches: int) -> float:
        """Time `batches` batches of the loader alone (no step); return its samples/s for this block."""
        samples, start = 0, time.perf_counter()
        for _ in range(batches):
            samples += count_samples(next(self.source))
        self.alone.append((time.perf_counter() - start, samples))
        return samples / self.alone[-1][0]

    def fed_block(self, steps: int) -> float:
        """Time `steps` steps fed by the loader, each split into data-wait and compute; return samples/s."""
        samples, start = 0, time.perf_counter()
        for _ in range(steps):
            t0 = time.perf_counter()
            batch = to_device(next(self.source), self.device)
            synchronize(self.device)  # the batch is on the device: what the step waited for ends here
            t1 = time.perf_counter()
            self.step(batch)
            synchronize(self.device)
            self.waits.append(t1 - t0)
            self.computes.append(time.perf_counter() - t1)
            samples += count_samples(batch)
        self.fed.append((time.perf_counter() - start, samples))
        return samples / self.fed[-1][0]

    def premade_block(self, steps: int) -> float:
        """Time `steps` steps on batches already on the device (the ceiling a loader can reach); return samples/s."""
        samples, start = 0, time.perf_counter()
        for i in range(steps):
            self.step(self.batches[i % len(self.batches)])
            samples += count_samples(self.batches[i % len(self.batches)])
        synchronize(self.device)
        self.ideal.append((time.perf_counter() - start, samples))
        self.premade_steps.append(self.ideal[-1][0] / steps)
        return samples / self.ideal[-1][0]

    def seconds_per_pair(self) -> float:
        """Time one fed and one pre-made step (a calibration), forget both, and return the seconds the pair took."""
        samples = count_samples(self.batches[0])
        seconds = samples / self.fed_block(1) + samples / self.premade_block(1)
        self.forget()
        return seconds

    def forget(self) -> None:
        """Drop every fed and pre-made block recorded so far (a calibration pair, say), keeping the loader running."""
        for recorded in (self.fed, self.ideal, self.waits, self.computes, self.premade_steps):
            recorded.clear()

    def result(self) -> PipelineResult:
        """Summarise every fed / pre-made block pair recorded so far."""
        if not self.fed or len(self.fed) != len(self.ideal):
            raise ValueError("record as many fed blocks as pre-made ones (at least one of each) before result()")
        ratios = [(n_f / t_f) / (n_i / t_i) for (t_f, n_f), (t_i, n_i) in zip(self.fed, self.ideal)]
        fed_rates = [n / t for t, n in self.fed]
        peak_device = peak_device_memory_bytes(self.device)
        return PipelineResult(
            samples_per_s=sum(n for _, n in self.fed) / sum(t for t, _ in self.fed),
            ideal_samples_per_s=sum(n for _, n in self.ideal) / sum(t for t, _ in self.ideal),
            pipeline_efficiency=statistics.median(ratios),
            data_wait_ms=1000 * statistics.median(self.waits),
            compute_ms=1000 * statistics.median(self.computes),
            steps=len(self.waits),
            peak_rss_mib=(peak_rss_bytes() or 0) / 2**20,
            peak_device_mib=peak_device / 2**20 if peak_device is not None else None,
            efficiency_range=(min(ratios), max(ratios)),
            samples_per_s_range=(min(fed_rates), max(fed_rates)),
            premade_step_ms=1000 * statistics.median(self.premade_steps),
        )


def measure_pipeline(
    loader: Iterable,
    step: Callable[[Any], Any],
    device: torch.device,
    *,
    blocks: int = 3,
    steps_per_block: int | None = None,
    budget_s: float | None = None,
    warmup: int = 2,
    premade: int = 4,
) -> PipelineResult:
    """Pipeline efficiency = fed samples/s over the same step's samples/s on pre-made device batches.

    Fed and pre-made blocks alternate (`blocks` of each). Efficiency is the median over block pairs of their
    throughput ratio: pairing cancels drift on the machine, and the median keeps a stray interruption from deciding
    the result. A fed step's data-wait is the time to get the next batch onto the device; its compute is the step.
    Give `steps_per_block`, or `budget_s` to size the blocks from one timed pair so that all of them take about that.
    """
    if (steps_per_block is None) == (budget_s is None):
        raise ValueError("give exactly one of steps_per_block and budget_s")
    probe = PipelineProbe(loader, step, device, premade=premade, warmup=warmup)
    if steps_per_block is None:
        steps_per_block = steps_in_budget(budget_s / blocks, probe.seconds_per_pair())
    reset_peak_rss()
    reset_peak_device_memory(probe.device)
    for _ in range(blocks):
        probe.fed_block(steps_per_block)
        probe.premade_block(steps_per_block)
    return probe.result()


def measure_pipelines(
    pipelines: dict[str, tuple[Iterable, Callable[[Any], Any]]],
    device: torch.device,
    *,
    budget_s: float,
    blocks: int = 3,
    warmup: int = 2,
) -> dict[str, PipelineResult]:
    """Several (loader, step) pipelines measured side by side: every probe is built and warmed up, each sized so that
    its `blocks` fed + pre-made pairs take about its share of `budget_s`, then the blocks run round-robin, pipeline
    after pipeline, so a burst of load on the machine hits all of them alike. Each result has its ranges."""
    probes = {name: PipelineProbe(loader, step, device, warmup=warmup) for name, (loader, step) in pipelines.items()}
    share_s = budget_s / len(probes) / blocks
    sizes = {name: steps_in_budget(share_s, probe.seconds_per_pair()) for name, probe in probes.items()}
    for _ in range(blocks):
        for name, probe in probes.items():
            probe.fed_block(sizes[name])
            probe.premade_block(sizes[name])
    return {name: probe.result() for name, probe in probes.items()}

