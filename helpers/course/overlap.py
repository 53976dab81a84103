"""Lesson 04's "overlap the copy" measurements: a DataLoader with one slow worker read in order and out of order
(`in_order=False`), and on CUDA the host-to-device copy from pageable and pinned memory, blocking and not, and with
the side-stream prefetcher against a copy on the step's own stream. Interleaved rounds after one untimed pass of
each, a range for each row."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from ..measure import synchronize
from ..prefetch import PrefetchLoader
from ..spread import Spread


class SlowWorkerDataset(Dataset):
    """Samples that cost `fast_s` seconds each to make, and `slow_s` in worker 0: one straggler among the workers
    (a worker stuck on a large file, a slow disk, a busy core)."""

    def __init__(self, samples: int, *, fast_s: float, slow_s: float, shape: tuple[int, ...] = (3, 8, 8)) -> None:
        self.samples, self.fast_s, self.slow_s, self.shape = samples, fast_s, slow_s, shape

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        worker = get_worker_info()
        time.sleep(self.slow_s if worker is not None and worker.id == 0 else self.fast_s)
        return torch.full(self.shape, index % 256, dtype=torch.uint8), index


def _summary(name: str, seconds: list[float], batches: int, note: str = "") -> dict[str, Any]:
    """A row: median batches/s over rounds with its (low, high) range."""
    rates = Spread.of([batches / s for s in seconds])
    return {
        "name": name,
        "batches_per_s": rates.median,
        "range": rates.range,
        "rounds": rates.n,
        "note": note,
    }


def in_order_rows(
    *, batches: int, rounds: int, batch_size: int = 4, fast_s: float = 0.002, slow_s: float = 0.008
) -> list[dict[str, Any]]:
    """Batches/s of a 2-worker DataLoader whose worker 0 is `slow_s / fast_s` times slower, with in_order True and
    False, in interleaved rounds (workers started before each timed block); each row keeps the order its first round saw."""
    dataset = SlowWorkerDataset(batches * batch_size, fast_s=fast_s, slow_s=slow_s)
    times: dict[bool, list[float]] = {True: [], False: []}
    orders: dict[bool, list[int]] = {}
    for _ in range(rounds):
        for in_order in (True, False):
            loader = DataLoader(dataset, batch_size=batch_size, num_workers=2, in_order=in_order, prefetch_factor=2)
            iterator = iter(loader)  # the workers start here, outside the timed block
            start = time.perf_counter()
            order = [int(labels[0]) // batch_size for _, labels in iterator]
            times[in_order].append(time.perf_counter() - start)
            if sorted(order) != list(range(batches)):
                raise AssertionError(f"in_order={in_order} lost or repeated batches: {order}")
            orders.setdefault(in_order, order)
    note = f"2 workers, worker 0 makes each sample in {slow_s * 1e3:.0f} ms, worker 1 in {fast_s * 1e3:.0f} ms"
    return [
        {**_summary("in_order=True (the default)", times[True], batches, note), "order": orders[True]},
        {**_summary("in_order=False", times[False], batches, note), "order": orders[False]},
    ]


def _timed(fn: Callable[[], Any], device: torch.device) -> float:
    """Seconds of `fn()`, the device synchronised before the clock starts and before it stops."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def _interleaved(ways: dict[str, Callable[[], Any]], rounds: int, device: torch.device) -> dict[str, list[float]]:
    """Seconds of each way per round, the ways interleaved, after one untimed pass of each (the first copies and
    kernels also pay CUDA's lazy start-up, the allocator's first blocks and the host allocator's first pins)."""
    for fn in ways.values():
        _timed(fn, device)
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, fn in ways.items():
            times[name].append(_timed(fn, device))
    return times


def copy_rows(device: torch.device, *, batch: int, side: int, copies: int, rounds: int) -> list[dict[str, Any]]:
    """CUDA only: batches/s of `copies` host-to-device copies of a uint8 image batch, four ways, interleaved."""
    pageable = torch.randint(0, 256, (batch, 3, side, side), dtype=torch.uint8)
    pinned = pageable.pin_memory()
    ways: dict[str, Callable[[], Any]] = {
        "pageable, .to(device)": lambda: [pageable.to(device) for _ in range(copies)],
        "pageable, .to(device, non_blocking=True)": lambda: [
            pageable.to(device, non_blocking=True) for _ in range(copies)
        ],
        ".pin_memory() per batch, then non_blocking": lambda: [
            pageable.pin_memory().to(device, non_blocking=True) for _ in range(copies)
        ],
        "pinned once (DataLoader pin_memory=True), non_blocking": lambda: [
            pinned.to(device, non_blocking=True) for _ in range(copies)
        ],
    }
    times = _interleaved(ways, rounds, device)
    note = f"{batch}x3x{side}x{side} uint8 ({pageable.numel() / 2**20:.1f} MiB)"
    return [_summary(name, seconds, copies, note) for name, seconds in times.items()]


def prefetch_rows(device: torch.device, *, batch: int, side: int, steps: int, rounds: int) -> list[dict[str, Any]]:
    """CUDA only: steps/s of a convolution step fed pinned uint8 batches copied on its own stream against
    PrefetchLoader's side stream, interleaved."""
    batches = [torch.randint(0, 256, (batch, 3, side, side), dtype=torch.uint8).pin_memory() for _ in range(steps)]
    conv = torch.nn.Conv2d(3, 64, 3, padding=1).to(device)

    def plain() -> None:
        for images in batches:
            conv(images.to(device, non_blocking=True).float().div_(255)).sum()

    def prefetched() -> None:
        for images in PrefetchLoader(batches, device):
            conv(images).sum()

    times = _interleaved(
        {"copy on the step's stream": plain, "PrefetchLoader (side stream)": prefetched}, rounds, device
    )
    note = f"{batch}x3x{side}x{side} uint8 batches, pinned; one 3x3 convolution to 64 channels per step"
    return [_summary(name, seconds, steps, note) for name, seconds in times.items()]
