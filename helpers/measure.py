"""Measuring an input pipeline: loader throughput, data-wait against compute, efficiency, peak memory (for doctor.py).

Every timed block starts and ends with a device synchronisation (on CUDA a host timer alone measures how fast kernels
were queued); between steps it waits for the current stream only, so a loader's copy on a side stream (prefetch.py)
keeps its overlap and only what the step did not hide is data-wait. `clock`, `synchronize` and `synchronize_stream` are
module attributes (a test records their order). Each block reads the load meter and, on CUDA, its peak device memory.

Example:
    >>> model, loader = torch.nn.Linear(3, 1), [(torch.randn(8, 3), torch.zeros(8))] * 4
    >>> def step(batch): model(batch[0]).sum().backward()
    >>> result = measure_pipeline(loader, step, torch.device("cpu"), steps_per_block=2, blocks=2)
    >>> result.steps, result.fed_samples_per_s > 0  # and pipeline_efficiency, data_wait_ms, compute_ms, ranges
    (4, True)

Copy with: loadmeter.py, memory.py, pipeline_result.py, spread.py.
Needs: psutil, torch.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from .loadmeter import LoadMeter
from .memory import (
    allocated_device_memory_bytes,
    peak_device_memory_bytes,
    peak_rss_bytes,
    reset_peak_device_memory,
    reset_peak_rss,
)
from .pipeline_result import PipelineResult  # noqa: F401 (re-exported: what PipelineProbe.result() returns)
from .spread import Spread

# --- timing ---

clock = time.perf_counter  # the host clock every timed block reads (a module attribute: tests record its calls)


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so host timers measure it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def synchronize_stream(device: torch.device) -> None:
    """Wait for the current stream of `device` only (a side stream's work, a prefetcher's copy, goes on); CPU: none."""
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()


def device_of(batch: Any) -> torch.device:
    """The device of a batch's first tensor (the CPU when it holds none)."""
    while isinstance(batch, (list, tuple)) and batch:
        batch = batch[0]
    return batch.device if isinstance(batch, torch.Tensor) else torch.device("cpu")


def count_samples(batch: Any) -> int:
    """The number of samples in a batch (the first dimension of its first tensor)."""
    while isinstance(batch, (list, tuple)):
        batch = batch[0]
    return int(batch.shape[0])


_NONE = object()  # what an exhausted iterator gives `next` as its default


class _Restarting:
    """An endless iterator over a loader: starts a new epoch when one ends."""

    def __init__(self, loader: Iterable) -> None:
        self.loader = loader
        self.iterator: Iterator[Any] | None = iter(loader)  # None while paused (PipelineProbe.pause)

    def __next__(self) -> Any:
        if self.iterator is None:  # paused: start the loader (and its workers) again
            self.iterator = iter(self.loader)
        try:
            return next(self.iterator)
        except StopIteration:
            self.iterator = iter(self.loader)
            batch = next(self.iterator, _NONE)
            if batch is _NONE:
                raise ValueError("the loader gave no batch: an empty dataset, or a sampler with no samples") from None
            return batch


def batches_ahead(loader: Any) -> int:
    """How many batches `loader` can hold ready before they are asked for: a DataLoader's workers x prefetch_factor,
    or what a loader says itself in a `batches_ahead` attribute (a background thread's queue and the batch in its
    hand: sr_cache.CachedCropLoader, prefetch.BackgroundPrefetcher); 0 for a loader that makes batches on demand."""
    own = getattr(loader, "batches_ahead", None)
    workers = int(getattr(loader, "num_workers", 0) or 0) * int(getattr(loader, "prefetch_factor", 0) or 0)
    return workers if own is None else int(own)


def time_batches(
    loader: Iterable, batches: int, *, warmup: int = 1, device: torch.device | None = None
) -> dict[str, Any]:
    """Draw `warmup` batches and what the loader holds ready ahead (`batches_ahead`: timed, they would look instant),
    then time `batches` (restarting the loader as needed); return samples/s, seconds and the load meter's reading.
    The clock stops after synchronising `device` (default: the device the batches are on)."""
    source = _Restarting(loader)
    batch = None
    for _ in range(warmup + batches_ahead(loader)):
        batch = next(source)
    if batch is not None:
        synchronize(device or device_of(batch))
    meter = LoadMeter()
    meter.start()
    samples, start = 0, clock()
    for _ in range(batches):
        batch = next(source)
        samples += count_samples(batch)
    synchronize(device or device_of(batch))  # an on-device loader's batches are made when its kernels have run
    seconds = clock() - start
    load = meter.stop()
    return {"samples_per_s": samples / seconds, "seconds": seconds, "samples": samples, "load": load.as_dict()}


def seconds_per_call(
    fn: Callable[[], Any], *, calls: int = 3, warmup: int = 1, device: torch.device | None = None
) -> float:
    """Median wall seconds of `fn()` over `calls` timed calls after `warmup` untimed ones (queued device work included:
    `device`, by default the current CUDA device once CUDA is in use, is synchronised before and after each call)."""
    if device is None and torch.cuda.is_available() and torch.cuda.is_initialized():
        device = torch.device("cuda", torch.cuda.current_device())
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(calls):
        if device is not None:
            synchronize(device)
        start = clock()
        fn()
        if device is not None:
            synchronize(device)
        times.append(clock() - start)
    return statistics.median(times)


def steps_in_budget(budget_s: float, seconds_per_step: float, *, minimum: int = 1, maximum: int | None = None) -> int:
    """How many steps of `seconds_per_step` fit in `budget_s`, at least `minimum` and at most `maximum`."""
    steps = max(minimum, int(budget_s / max(seconds_per_step, 1e-9)))
    return steps if maximum is None else min(steps, maximum)


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


class PipelineProbe:
    """One loader feeding one training step, measured in blocks the caller interleaves (so a burst of load hits every
    variant alike): the loader alone, steps fed by it (split into data-wait and compute), steps on pre-made device
    batches. `pause()` stops the loader's workers between turns, `drain()` restarts them untimed."""

    def __init__(
        self, loader: Iterable, step: Callable[[Any], Any], device: torch.device, *, premade: int = 4, warmup: int = 2
    ) -> None:
        self.step, self.device = step, torch.device(device)
        self.source = _Restarting(loader)
        self.host_batch = next(self.source)  # the first batch as the loader yields it, before anything moved it
        self.batches = [to_device(self.host_batch, self.device)]
        self.batches += [to_device(next(self.source), self.device) for _ in range(premade - 1)]
        for i in range(warmup):  # kernel selection, allocator, worker start-up: never timed
            step(to_device(next(self.source), self.device))
            step(self.batches[i % premade])
        synchronize(self.device)
        self.meter = LoadMeter()
        self.alone: list[tuple[float, int]] = []  # (seconds, samples) per block of each kind
        self.fed: list[tuple[float, int]] = []
        self.premade: list[tuple[float, int]] = []
        self.waits: list[list[float]] = []  # seconds per fed step, one list per fed block
        self.computes: list[list[float]] = []
        # CUDA, per block: (bytes allocated as it started, the allocator's peak in it, its counter reset at the start)
        self.device_memory: list[tuple[int, int]] = []
        self._allocated_at_start: int | None = None

    @property
    def workers(self) -> int:
        """The loader's worker processes (0 for a loader in this process)."""
        return int(getattr(self.source.loader, "num_workers", 0) or 0)

    @property
    def batch_samples(self) -> int:
        """Samples in one batch."""
        return count_samples(self.batches[0])

    def _begin(self) -> float:
        synchronize(self.device)  # work queued before this block is not its work
        self._allocated_at_start = allocated_device_memory_bytes(self.device)  # None off CUDA
        if self._allocated_at_start is not None:
            reset_peak_device_memory(self.device)
        self.meter.start()
        return clock()

    def _end(self, start: float) -> float:
        synchronize(self.device)  # the block's last device work has run before its clock stops
        seconds = clock() - start
        self.meter.stop()
        peak = peak_device_memory_bytes(self.device)
        if self._allocated_at_start is not None and peak is not None:
            self.device_memory.append((self._allocated_at_start, peak))
        return seconds

    def peak_above_start_bytes(self) -> int | None:
        """The most device memory a block allocated beyond what was held when it started (its batches in flight,
        activations, gradients), over the blocks recorded so far; None off CUDA or before any block."""
        return max((peak - start for start, peak in self.device_memory), default=None)

    def loader_block(self, batches: int) -> float:
        """Time `batches` batches of the loader alone (no step); return its samples/s for this block."""
        samples, start = 0, self._begin()
        for _ in range(batches):
            samples += count_samples(next(self.source))
        self.alone.append((self._end(start), samples))  # an on-device loader's batches exist once its kernels ran
        return samples / self.alone[-1][0]

    def fed_block(self, steps: int) -> float:
        """Time `steps` steps fed by the loader, each split into data-wait and compute; return samples/s."""
        samples, waits, computes, start = 0, [], [], self._begin()
        for _ in range(steps):
            t0 = clock()
            batch = to_device(next(self.source), self.device)
            synchronize_stream(self.device)  # the batch is on the device: what the step waited for ends here
            t1 = clock()
            self.step(batch)
            synchronize_stream(self.device)
            waits.append(t1 - t0)
            computes.append(clock() - t1)
            samples += count_samples(batch)
        self.fed.append((self._end(start), samples))
        self.waits.append(waits)
        self.computes.append(computes)
        return samples / self.fed[-1][0]

    def premade_block(self, steps: int) -> float:
        """Time `steps` steps on batches already on the device (the ceiling a loader can reach); return samples/s."""
        samples, start = 0, self._begin()
        for i in range(steps):
            self.step(self.batches[i % len(self.batches)])
            # Per step, as in fed_block (which must synchronise per step to split data-wait from compute): both
            # sides of the efficiency ratio pay the same synchronisations and overlap no step with the next.
            synchronize_stream(self.device)
            samples += count_samples(self.batches[i % len(self.batches)])
        self.premade.append((self._end(start), samples))
        return samples / self.premade[-1][0]

    def block_pair(self, steps: int, *, drain: int | None = None) -> tuple[float, float]:
        """A fed block then a pre-made block of `steps` steps, the workers stopped between them (running, they would
        refill their queues and slow the baseline) and restarted untimed before (`drain`, as in drain(); none without
        workers). Returns (fed, pre-made) samples/s."""
        self.drain(drain if drain is not None or self.workers else 0)
        fed = self.fed_block(steps)
        self.pause()
        return fed, self.premade_block(steps)

    def rates(self, kind: str) -> list[float]:
        """Samples/s of each block of one kind so far: "alone" (the loader alone), "fed" or "premade"."""
        return [n / t for t, n in {"alone": self.alone, "fed": self.fed, "premade": self.premade}[kind]]

    def drain(self, batches: int | None = None) -> None:
        """Draw batches untimed: by default what the loader holds ready (`batches_ahead`), at least one, so a turn
        counts neither batches made while others ran nor the workers' start-up after `pause()`."""
        ready = batches_ahead(self.source.loader)
        for _ in range(max(1, ready) if batches is None else batches):
            next(self.source)

    def pause(self) -> None:
        """Shut the loader's worker processes down until the next batch is drawn (a no-op without workers)."""
        if not self.workers:
            return
        iterator, self.source.iterator = self.source.iterator, None
        loader = self.source.loader
        # torch has no public call that stops persistent workers short of dropping the loader: release the
        # DataLoader's own reference and run the shutdown its iterator's __del__ would run.
        if getattr(loader, "_iterator", None) is iterator:
            loader._iterator = None  # type: ignore[attr-defined]
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if callable(shutdown):
            shutdown()

    def close(self) -> None:
        """Stop the loader's workers and run its dataset's `cleanup()` where it has one (temporary files, say)."""
        self.pause()
        cleanup = getattr(getattr(self.source.loader, "dataset", None), "cleanup", None)
        if callable(cleanup):
            cleanup()

    def seconds_per_pair(self) -> float:
        """Time one fed and one pre-made step (a calibration), forget both, and return the seconds the pair took."""
        samples = self.batch_samples
        seconds = samples / self.fed_block(1) + samples / self.premade_block(1)
        self.forget()
        return seconds

    def forget(self, *, loader: bool = False) -> None:
        """Drop every fed and pre-made block recorded so far (a calibration pair, say) and their load and device
        memory readings, and with `loader` the loader-alone blocks too, keeping the loader running."""
        for recorded in (self.fed, self.premade, self.waits, self.computes, self.meter.readings, self.device_memory):
            recorded.clear()
        if loader:
            self.alone.clear()

    def result(self) -> PipelineResult:
        """Summarise every fed / pre-made block pair recorded so far."""
        if not self.fed or len(self.fed) != len(self.premade):
            raise ValueError("record as many fed blocks as pre-made ones (at least one of each) before result()")
        fed_rates, premade_rates = self.rates("fed"), self.rates("premade")
        ratios = Spread.of([f / p for f, p in zip(fed_rates, premade_rates, strict=True)])
        # means per step, not medians: wait + compute then add up to the fed step, and a worker's slow batch counts
        waits, computes = (Spread.of([1000 * statistics.fmean(b) for b in bs]) for bs in (self.waits, self.computes))
        peak_device = max((peak for _, peak in self.device_memory), default=None)  # None off CUDA
        return PipelineResult(
            fed_samples_per_s=sum(n for _, n in self.fed) / sum(t for t, _ in self.fed),
            premade_samples_per_s=sum(n for _, n in self.premade) / sum(t for t, _ in self.premade),
            pipeline_efficiency=ratios.median,
            data_wait_ms=1000 * statistics.fmean([w for block in self.waits for w in block]),
            compute_ms=1000 * statistics.fmean([c for block in self.computes for c in block]),
            steps=sum(len(block) for block in self.waits),
            peak_rss_mib=(peak_rss_bytes() or 0) / 2**20,
            peak_device_mib=peak_device / 2**20 if peak_device is not None else None,
            efficiency_range=ratios.range,
            fed_samples_per_s_range=Spread.of(fed_rates).range,
            premade_step_ms=1000 * statistics.median([t / n * self.batch_samples for t, n in self.premade]),
            premade_samples_per_s_range=Spread.of(premade_rates).range,
            data_wait_ms_range=waits.range,
            compute_ms_range=computes.range,
            load=self.meter.total(),
            fed_blocks=tuple(fed_rates),
            compute_blocks=tuple(1000 * statistics.fmean(block) for block in self.computes),
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
    """Pipeline efficiency = fed samples/s over the same step's samples/s on pre-made device batches: `blocks` fed /
    pre-made pairs (`PipelineProbe.block_pair`, workers stopped during each pre-made block and at the end), the
    median of their ratios (pairing cancels drift; the median, a stray interruption). Data-wait is getting the next
    batch onto the device, compute the step. Give `steps_per_block`, or `budget_s` to size blocks from a timed pair."""
    if (steps_per_block is None) == (budget_s is None):
        raise ValueError("give exactly one of steps_per_block and budget_s")
    probe = PipelineProbe(loader, step, device, premade=premade, warmup=warmup)
    if steps_per_block is None:
        assert budget_s is not None  # exactly one of the two, checked above
        steps_per_block = steps_in_budget(budget_s / blocks, probe.seconds_per_pair())
    reset_peak_rss()
    reset_peak_device_memory(probe.device)
    for _ in range(blocks):
        probe.block_pair(steps_per_block)
    return probe.result()


def measure_pipelines(
    pipelines: dict[str, tuple[Iterable, Callable[[Any], Any]]],
    device: torch.device,
    *,
    budget_s: float,
    blocks: int = 3,
    warmup: int = 2,
) -> dict[str, PipelineResult]:
    """Several (loader, step) pipelines measured side by side: each probe built, warmed up and sized to its share of
    `budget_s`, then the blocks run round-robin (a burst of load hits all alike; workers run only in their turn)."""
    probes, sizes, share_s = {}, {}, budget_s / len(pipelines) / blocks
    for name, (loader, step) in pipelines.items():  # each built, warmed up and sized, then its workers stopped
        probes[name] = PipelineProbe(loader, step, device, warmup=warmup)
        sizes[name] = steps_in_budget(share_s, probes[name].seconds_per_pair())
        probes[name].pause()
    for _ in range(blocks):
        for name, probe in probes.items():  # only the probe whose turn it is has live workers
            probe.block_pair(sizes[name])
    return {name: probe.result() for name, probe in probes.items()}
