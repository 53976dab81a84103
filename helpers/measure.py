"""Measuring an input pipeline: loader throughput, data-wait against compute, pipeline efficiency, peak memory, and
the pipeline doctor that turns those numbers into a verdict and what to try next.

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


def time_batches(loader: Iterable, batches: int, warmup: int = 1) -> dict[str, float]:
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


# --- memory ---


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set size (Linux: /proc/self/clear_refs); False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int | None:
    """This process's peak resident set size since start or the last reset, in bytes (None where unknown)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
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


# --- a loader alone ---


def measure_loader(loader: Iterable, batches: int, warmup: int = 1) -> dict[str, Any]:
    """Samples/s of a loader on its own (no model), with this process's peak RSS during the run."""
    reset_peak_rss()
    result = time_batches(loader, batches, warmup)
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

    samples_per_s: float
    ideal_samples_per_s: float
    pipeline_efficiency: float
    data_wait_ms: float
    compute_ms: float
    steps: int
    peak_rss_mib: float
    peak_device_mib: float | None
    efficiency_range: tuple[float, float] | None = None  # lowest and highest block-pair ratio: the spread

    @property
    def data_wait_fraction(self) -> float:
        """Share of a fed step spent waiting for data."""
        return self.data_wait_ms / max(self.data_wait_ms + self.compute_ms, 1e-12)


def measure_pipeline(
    loader: Iterable,
    step: Callable[[Any], Any],
    device: torch.device,
    *,
    steps_per_block: int,
    blocks: int = 3,
    warmup: int = 2,
    premade: int = 4,
) -> PipelineResult:
    """Pipeline efficiency = fed samples/s over the same step's samples/s on pre-made device batches.

    Fed and pre-made blocks alternate (`blocks` of each). Efficiency is the median over block pairs of
    (pre-made block time / fed block time): pairing cancels drift on the machine, and the median keeps a stray
    interruption from deciding the result. A fed step's data-wait is the time to get the next batch onto the
    device; its compute is the step itself (medians per step).
    """
    device = torch.device(device)
    source = _Restarting(loader)
    batches = [to_device(next(source), device) for _ in range(premade)]
    for i in range(warmup):
        step(to_device(next(source), device))
        step(batches[i % premade])
    synchronize(device)
    reset_peak_rss()
    reset_peak_device_memory(device)
    waits: list[float] = []
    computes: list[float] = []
    fed: list[tuple[float, int]] = []
    ideal: list[tuple[float, int]] = []
    for _ in range(blocks):  # interleaved: fed, pre-made, fed, pre-made, ...
        fed.append(_fed_block(source, step, device, steps_per_block, waits, computes))
        ideal.append(_premade_block(batches, step, device, steps_per_block))
    ratios = [ideal_s / fed_s for (fed_s, _), (ideal_s, _) in zip(fed, ideal)]
    peak_device = peak_device_memory_bytes(device)
    return PipelineResult(
        samples_per_s=sum(n for _, n in fed) / sum(t for t, _ in fed),
        ideal_samples_per_s=sum(n for _, n in ideal) / sum(t for t, _ in ideal),
        pipeline_efficiency=statistics.median(ratios),
        data_wait_ms=1000 * statistics.median(waits),
        compute_ms=1000 * statistics.median(computes),
        steps=len(waits),
        peak_rss_mib=(peak_rss_bytes() or 0) / 2**20,
        peak_device_mib=peak_device / 2**20 if peak_device is not None else None,
        efficiency_range=(min(ratios), max(ratios)),
    )


def _fed_block(
    source: _Restarting, step: Callable[[Any], Any], device: torch.device, steps: int,
    waits: list[float], computes: list[float],
) -> tuple[float, int]:  # fmt: skip
    """`steps` steps fed by the loader; appends each step's data-wait and compute; returns (seconds, samples)."""
    samples, start = 0, time.perf_counter()
    for _ in range(steps):
        t0 = time.perf_counter()
        batch = to_device(next(source), device)
        synchronize(device)  # the batch is on the device: what the step waited for ends here
        t1 = time.perf_counter()
        step(batch)
        synchronize(device)
        waits.append(t1 - t0)
        computes.append(time.perf_counter() - t1)
        samples += count_samples(batch)
    return time.perf_counter() - start, samples


def _premade_block(batches: list[Any], step: Callable[[Any], Any], device: torch.device, steps: int) -> tuple[float, int]:
    """`steps` steps on batches already on the device (the ceiling a loader can reach); returns (seconds, samples)."""
    samples, start = 0, time.perf_counter()
    for i in range(steps):
        step(batches[i % len(batches)])
        samples += count_samples(batches[i % len(batches)])
    synchronize(device)
    return time.perf_counter() - start, samples


def diagnose_pipeline(
    result: PipelineResult, *, num_workers: int | None = None, cpu_cores: int | None = None
) -> str:
    """The pipeline doctor: input-bound or compute-bound, and what to try next (first line: the verdict)."""
    wait = result.data_wait_fraction
    numbers = (
        f"efficiency {result.pipeline_efficiency:.2f}; {100 * wait:.0f}% of each step waits for data "
        f"({result.data_wait_ms:.1f} ms wait, {result.compute_ms:.1f} ms compute)"
    )
    if wait > 0.10 or result.pipeline_efficiency < 0.90:
        advice = [f"INPUT-BOUND: {numbers}.", "The model waits for data; try, in order:"]
        if num_workers is not None and cpu_cores and num_workers < cpu_cores:
            advice.append(f"- more DataLoader workers ({num_workers} now, {cpu_cores} cores), persistent_workers=True;")
        advice += [
            "- decode once: a uint8 cache of decoded images (DecodedSRCache in sr_cache.py), not files per sample;",
            "- crop before converting to float, and send uint8 to the device (4x fewer bytes), normalise there;",
            "- batch augmentation on the device (kornia) instead of per-sample PIL transforms;",
            "- pin_memory=True with non_blocking copies on CUDA.",
        ]
        return "\n".join(advice)
    return (
        f"COMPUTE-BOUND: {numbers}.\nThe input pipeline keeps up. Speed up the step itself: mixed precision "
        "(torch.amp), channels_last, a larger batch, torch.compile; more loader work will not help."
    )
