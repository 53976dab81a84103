"""Choosing the precision by measurement: which precisions a device runs natively, interleaved repeated timings with
a range per candidate, a choice that says when the candidates are within the noise, and a small JSON cache so a
choice is measured once per device and model, not at every start-up.

Example:
    >>> choice = choose_precision({"fp32": [10.0, 10.4, 11.0], "bf16": [6.0, 6.2, 6.5]}, device="cpu")  # ms per step
    >>> choice.precision, choice.within_noise
    ('bf16', False)
    >>> choose_precision({"fp32": [10.0, 12.0], "bf16": [9.5, 12.5]}, device="cpu").precision  # within the noise
    'fp32'
    >>> times = interleaved_times({"sum": lambda: torch.ones(9).sum(), "mean": lambda: torch.ones(9).mean()}, rounds=3)
    >>> {name: len(ms) for name, ms in times.items()}  # one value per round, the candidates taking turns
    {'sum': 3, 'mean': 3}

Copy with: step.py (the training step it times), spread.py (medians with their ranges).
Needs: torch.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import hashlib
import json
import os
import platform
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .spread import Spread
from .step import TrainStep, cpu_has_native_bf16, native_precisions

try:
    import fcntl
except ImportError:  # Windows: no fcntl; two processes saving at once may then lose one entry (a cache: measured again)
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "PrecisionChoice",
    "choose_precision",
    "cpu_has_native_bf16",
    "fastest_precision",
    "interleaved_times",
    "native_precisions",
]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def interleaved_times(
    calls: Mapping[str, Callable[[], Any]],
    *,
    rounds: int,
    per_round: int = 1,
    warmup: int = 1,
    device: torch.device | str = "cpu",
) -> dict[str, list[float]]:
    """Milliseconds per call of each candidate, one value per round: in every round each candidate runs `per_round`
    calls in turn (A, B, A, B, ...), so a burst of load on the machine hits all of them alike. The device is
    synchronised before each clock start and after the last call of each turn."""
    device = torch.device(device)
    for fn in calls.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            _synchronize(device)
            start = time.perf_counter()
            for _ in range(per_round):
                fn()
            _synchronize(device)
            times[name].append(1000 * (time.perf_counter() - start) / per_round)
    return times


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a run should use on this device, the median step time of each candidate with its range over
    the interleaved rounds, why, what the measurement cost, and whether it came from the cache."""

    precision: str
    step_ms: dict[str, float]
    reason: str
    step_ms_range: dict[str, tuple[float, float]] = field(default_factory=dict)
    within_noise: bool = False
    cost_s: float = 0.0
    cached: bool = False


def choose_precision(
    times_ms: dict[str, list[float]], *, device: torch.device | str, cost_s: float = 0.0
) -> PrecisionChoice:
    """The fastest candidate by median step time, unless its difference from another is within the noise (its ratio
    to it, round by round over the interleaved rounds, reaches 1 in some round: `Spread.ties`): then fp32 (full
    precision) is kept when it is among the tied ones, else the lower median."""
    spreads = {p: Spread.paired(v) for p, v in times_ms.items()}  # interleaved rounds: compared round by round
    medians, spans = {p: s.median for p, s in spreads.items()}, {p: s.range for p, s in spreads.items()}
    best = min(medians, key=medians.__getitem__)
    if len(medians) == 1:
        return PrecisionChoice(best, medians, f"{best}: the only candidate measured", spans, False, cost_s)
    tied = [p for p in medians if p != best and spreads[p].ties(spreads[best])]
    shown = ", ".join(f"{p} {s.text(1, unit='ms')}" for p, s in spreads.items())
    rounds = min(len(v) for v in times_ms.values())
    paired = all(spreads[p].pairs_with(spreads[best]) for p in spreads)
    if not tied:
        beat = f"in each of the {rounds} interleaved rounds" if paired else "its whole range below the others'"
        reason = f"{best}: the fastest training step on {device}, {beat} ({shown})"
        return PrecisionChoice(best, medians, reason, spans, False, cost_s)
    pick = "fp32" if "fp32" in tied else best
    why = "as full precision is kept when nothing is clearly faster" if pick == "fp32" else "by the lower median"
    reason = (
        f"{pick}: {best} and {', '.join(tied)} are within the noise of this machine over {rounds} interleaved rounds "
        f"({'some round reverses their order' if paired else 'their ranges overlap'}); {pick} is taken, {why} ({shown})"
    )
    return PrecisionChoice(pick, medians, reason, spans, True, cost_s)


def device_signature(device: torch.device | str) -> str:
    """What makes a timing on `device` valid elsewhere: the GPU's name and capability or the CPU's, and torch."""
    device = torch.device(device)
    if device.type == "cuda":
        name = f"{torch.cuda.get_device_name(device)} sm{''.join(map(str, torch.cuda.get_device_capability(device)))}"
    else:
        name = f"{platform.machine()} {platform.processor()} {torch.backends.cpu.get_cpu_capability()} {os.cpu_count()}"
    return f"{device.type}: {name}; torch {torch.__version__}"


def model_signature(model: nn.Module, example: Any, *, channels_last: bool = False) -> str:
    """A short digest of the model's class, parameter shapes and the example's shapes and dtypes."""
    shapes = [tuple(p.shape) for p in model.parameters()]
    inputs = [(tuple(t.shape), str(t.dtype)) for t in example if isinstance(t, torch.Tensor)]
    text = repr((type(model).__qualname__, shapes, inputs, channels_last))
    return f"{type(model).__name__}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


CACHE_BYTES = 16 << 20  # a file of timing choices: past this it is not one


def _read_cache(path: Path) -> dict:
    """The JSON object in the cache file at `path`, or {} when it is missing, unreadable or not a regular file: the
    open is non-blocking and checked with fstat, so a FIFO or /dev/zero there is never read (safe_open.py's check,
    written out so this module copies with step.py alone)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError:
        return {}
    with os.fdopen(descriptor, "rb") as f:
        data = f.read(CACHE_BYTES + 1) if stat.S_ISREG(os.fstat(descriptor).st_mode) else b""
    try:
        entries = json.loads(data) if 0 < len(data) <= CACHE_BYTES else {}
    except ValueError:
        return {}
    return entries if isinstance(entries, dict) else {}


def load_cached_choice(path: str | os.PathLike, key: str) -> PrecisionChoice | None:
    """The choice saved under `key` in the JSON file at `path`, or None (no file, no entry, or an unreadable file)."""
    try:
        entry = _read_cache(Path(path))[key]
        ranges = {p: (float(low), float(high)) for p, (low, high) in entry["step_ms_range"].items()}
        return PrecisionChoice(
            entry["precision"],
            dict(entry["step_ms"]),
            entry["reason"],
            ranges,
            bool(entry["within_noise"]),
            float(entry["cost_s"]),
            cached=True,
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


@contextlib.contextmanager
def _locked(lock: Path) -> Iterator[None]:
    """An exclusive lock on the file `lock` for the block (none where fcntl is missing), opened without following a
    link; a FIFO or folder there is named."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    descriptor = os.open(lock, flags, 0o644)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(
                errno.EINVAL, f"{lock}: not a regular file, where the cache's lock goes; remove it", str(lock)
            )
        if fcntl is not None:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def save_cached_choice(path: str | os.PathLike, key: str, choice: PrecisionChoice) -> None:
    """Add `choice` under `key` to the JSON file at `path`: under a lock beside it (two processes saving at once
    keep both entries), through a fresh scratch file renamed into place (never through a link planted there)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        raise IsADirectoryError(errno.EISDIR, f"{path}: is a folder, where the precision cache (a JSON file) goes")
    with _locked(path.with_name(f"{path.name}.lock")):
        entries = _read_cache(path)
        entries[key] = {**asdict(choice), "cached": False}
        scratch = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            scratch.unlink()  # a killed save's, or a planted link (unlink removes the link, never its target)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with os.fdopen(os.open(scratch, flags, 0o644), "w", encoding="utf-8") as f:
            f.write(json.dumps(entries, indent=1))
        os.replace(scratch, path)


# --- measuring: the trial steps ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _trial_steps(
    model: nn.Module, candidates: list[str], *, loss_fn: Callable, device: torch.device, channels_last: bool
) -> Iterator[dict[str, TrainStep]]:
    """One TrainStep per precision, each on its own copy of `model` (the model itself is not trained)."""
    steps = {}
    for precision in candidates:
        trial = copy.deepcopy(model).to(device)
        steps[precision] = TrainStep(
            trial,
            torch.optim.SGD(trial.parameters(), lr=1e-6),
            loss_fn,
            device=device,
            precision=precision,
            channels_last=channels_last,
        )
    try:
        yield steps
    finally:
        steps.clear()


def fastest_precision(
    model: nn.Module,
    example: tuple[torch.Tensor, torch.Tensor],
    *,
    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor],
    device: torch.device | str,
    rounds: int = 5,
    steps: int = 1,
    channels_last: bool = False,
    cache: str | os.PathLike | None = None,
) -> PrecisionChoice:
    """Time training steps of a copy of `model` on `example` in each native precision of `device`, interleaved
    over `rounds` rounds of `steps` steps (after one warm-up step each), and choose by `choose_precision` (within the
    noise it says so). It costs about (rounds * steps + 1) steps per candidate, stated in `cost_s`. With `cache` (a
    JSON file) a choice measured before for this device and model signature is reused, and a new one is saved.
    With only fp32 native, nothing is timed."""
    device = torch.device(device)
    candidates = native_precisions(device)
    if candidates == ["fp32"]:
        return PrecisionChoice("fp32", {}, f"fp32: the only precision {device.type} runs natively here")
    key = f"{device_signature(device)} | {model_signature(model, example, channels_last=channels_last)}"
    if cache is not None and (cached := load_cached_choice(cache, key)) is not None:
        return cached
    start = time.perf_counter()
    with _trial_steps(model, candidates, loss_fn=loss_fn, device=device, channels_last=channels_last) as trials:
        calls = {p: (lambda s=s: s(*example)) for p, s in trials.items()}
        times = interleaved_times(calls, rounds=rounds, per_round=steps, warmup=1, device=device)
    choice = choose_precision(times, device=device, cost_s=time.perf_counter() - start)
    if cache is not None:
        save_cached_choice(cache, key, choice)
    return choice
