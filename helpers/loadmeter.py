"""The machine's CPU around a measurement: a load meter (how much CPU the rest of the machine used while a block
was timed, and the load average) and a CPU budget (DataLoader workers plus intra-op threads within the cores).

A timing taken while other programs kept the cores busy is not the pipeline's alone; the meter says so, so that a
table or verdict fed by a busy block can say it in words. psutil reads CPU times the same way on Linux, macOS and
Windows: hand-writing /proc parsing would cover one of the three.

Example:
    >>> cpu_budget(workers=8, cores=4)  # (DataLoader workers, intra-op threads): the main process keeps a core
    (3, 1)
    >>> with intra_op_threads(1):
    ...     torch.get_num_threads()
    1
    >>> meter = LoadMeter()
    >>> meter.start(); reading = meter.stop()  # reading.other_cores: what other programs used meanwhile
    >>> reading.cores == len(usable_cpus())
    True

Copy alone.
Needs: psutil, torch.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psutil
import torch

BUSY_CORES = 0.25  # other processes using at least this many cores during a block: the block was measured busy


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity where the system has one, else every CPU)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(psutil.cpu_count() or 1))


def _busy(times: object) -> float:
    # Linux counts guest time inside user time as well: subtract it so it is not counted twice.
    idle = sum(getattr(times, name, 0.0) for name in ("idle", "iowait", "guest", "guest_nice"))
    return sum(times) - idle  # type: ignore[call-overload]


def machine_cpu_seconds() -> float:
    """CPU seconds the CPUs this process may run on have spent busy since boot (all processes; idle and I/O wait
    excluded). Limited to those CPUs: in a container or under taskset, load elsewhere on the host takes none of ours."""
    per_cpu, cpus = psutil.cpu_times(percpu=True), usable_cpus()
    if len(cpus) == len(per_cpu) or max(cpus) >= len(per_cpu):  # all of them, or numbering we cannot map
        return _busy(psutil.cpu_times())
    return sum(_busy(per_cpu[cpu]) for cpu in cpus)


def tree_cpu_seconds(process: psutil.Process | None = None) -> float:
    """CPU seconds used by this process and every descendant alive now (plus children it has already reaped)."""
    process = process or psutil.Process()
    total = 0.0
    for member in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):  # a worker that exited between the listing and the read
            times = member.cpu_times()
            total += times.user + times.system
            if member is process:
                total += times.children_user + times.children_system
    return total


def load_average() -> float | None:
    """The one-minute load average where the system keeps one (Linux, macOS); None elsewhere."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


@dataclass
class LoadReading:
    """What the rest of the machine did during one or more timed blocks."""

    other_cores: float  # CPU used by processes outside this process tree, in cores, averaged over the blocks
    cores: int  # the machine's logical cores
    seconds: float  # wall seconds the reading covers
    load_average: float | None = None  # the highest one-minute load average read at the end of a block

    @property
    def busy(self) -> bool:
        """True when other processes used enough CPU to disturb the measurement."""
        return self.other_cores >= BUSY_CORES

    def note(self) -> str:
        """'other processes used 0.8 of 2 cores during this measurement' (with the load average where known)."""
        load = f"; load average {self.load_average:.1f}" if self.load_average is not None else ""
        return f"other processes used {self.other_cores:.1f} of {self.cores} cores during this measurement{load}"

    def as_dict(self) -> dict[str, float | int | bool | None]:
        """The reading as plain JSON-ready values."""
        return {
            "other_cores": round(self.other_cores, 3),
            "cores": self.cores,
            "seconds": round(self.seconds, 3),
            "load_average": self.load_average,
            "busy": self.busy,
        }


def combine(readings: list[LoadReading]) -> LoadReading | None:
    """Several readings as one: other cores weighted by each reading's seconds, the highest load average."""
    if not readings:
        return None
    seconds = sum(r.seconds for r in readings)
    other = sum(r.other_cores * r.seconds for r in readings) / max(seconds, 1e-12)
    loads = [r.load_average for r in readings if r.load_average is not None]
    return LoadReading(other, readings[0].cores, seconds, max(loads) if loads else None)


class LoadMeter:
    """Measures, between `start()` and `stop()`, the CPU the rest of the machine used: all CPU time minus this
    process tree's, over the wall time. Every reader is injectable, so a test can drive it with fixed numbers."""

    def __init__(
        self,
        *,
        machine: Callable[[], float] = machine_cpu_seconds,
        tree: Callable[[], float] = tree_cpu_seconds,
        wall: Callable[[], float] = time.perf_counter,
        loadavg: Callable[[], float | None] = load_average,
        cores: int | None = None,
    ) -> None:
        self.machine, self.tree, self.wall, self.loadavg = machine, tree, wall, loadavg
        self.cores = cores or len(usable_cpus())
        self.readings: list[LoadReading] = []
        self._started: tuple[float, float, float] | None = None

    def start(self) -> None:
        """Begin one interval."""
        self._started = (self.machine(), self.tree(), self.wall())

    def stop(self) -> LoadReading:
        """End the interval begun by `start()`, keep its reading and return it."""
        if self._started is None:
            raise RuntimeError("LoadMeter.stop() without start()")
        machine, tree, wall = self.machine(), self.tree(), self.wall()
        seconds = max(wall - self._started[2], 1e-12)
        other = (machine - self._started[0]) - (tree - self._started[1])
        # clamped to the machine: the CPU-time counters tick at their own moments, so a short interval can read more
        reading = LoadReading(min(max(0.0, other) / seconds, float(self.cores)), self.cores, seconds, self.loadavg())
        self._started = None
        self.readings.append(reading)
        return reading

    def total(self) -> LoadReading | None:
        """Every interval so far as one reading (None before the first)."""
        return combine(self.readings)

    def forget(self) -> None:
        """Drop the readings so far."""
        self.readings.clear()

    def __enter__(self) -> LoadMeter:
        """`with meter:` times one interval around the block (read it afterwards with `total()`)."""
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- the CPU budget ---


def cpu_budget(workers: int, cores: int, busy: int = 0) -> tuple[int, int]:
    """(workers, intra-op threads) that fit in `cores`: workers capped at cores - 1 so the main process keeps a core,
    and the threads take what the workers and the `busy` cores other processes occupy leave (at least one)."""
    workers = min(workers, max(0, cores - 1))
    return workers, max(1, cores - workers - busy)


def busy_cores(
    sample_s: float = 0.5, *, meter: LoadMeter | None = None, sleep: Callable[[float], None] = time.sleep
) -> int:
    """Whole cores other processes keep busy, from a short sample while this process sleeps (their CPU rounded to
    whole cores, at most all but one): the cores a CPU budget leaves them. Intra-op threads that share a core with
    another busy process wait for it at every operator's barrier, so one thread too many can cost several times."""
    meter = meter or LoadMeter()
    meter.start()
    sleep(sample_s)
    other = meter.stop().other_cores
    return max(0, min(meter.cores - 1, math.floor(other + 0.5)))


@contextlib.contextmanager
def intra_op_threads(threads: int) -> Iterator[int]:
    """Run a block with torch's intra-op threads set to `threads`, and restore the previous count afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
