"""The words every lesson's verdicts share beyond the library's (helpers.spread: a median with its range, a ratio with
its range, "within the noise", an efficiency never above 1): which of two measurements the course keeps when they
cannot be told apart, when an efficiency is as fast as pre-made batches, and the sentence for a measurement taken on
a busy machine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...pipeline_result import PipelineResult
from ...spread import WITHIN_NOISE, Spread, compare_text, efficiency_text


def timings(values: float | Sequence[float]) -> Spread:
    """Repeated timings as a Spread (a single number is one measurement, with no range)."""
    return Spread.single(float(values)) if isinstance(values, (int, float)) else Spread.of(values)


def compare(a: Spread, b: Spread, *, pick: tuple[str, str] | None = None, keep: tuple[str, str] | None = None) -> str:
    """a against b as helpers.spread.compare_text words it; when the two are within the noise, given `pick` (a's
    name, b's name), that this measurement cannot tell them apart here, and given `keep` too (the name kept, and
    why), which one the course keeps and why."""
    text = compare_text(a, b)
    return text + tie_text(pick, keep) if text.startswith(WITHIN_NOISE) else text


def tie_text(names: tuple[str, str] | None, keep: tuple[str, str] | None = None) -> str:
    """After a result within the noise: '; this measurement cannot tell 'a' and 'b' apart on this machine', and with
    `keep` (a name and why) ', so the course keeps 'a', why'."""
    if names is None:
        return ""
    text = f"; this measurement cannot tell '{names[0]}' and '{names[1]}' apart on this machine"
    return text + (f": the course keeps '{keep[0]}', {keep[1]}" if keep else "")


def efficiency_verdict(efficiency: Spread) -> str:
    """A pipeline efficiency as helpers.spread words it, and 'as fast as pre-made batches within the noise' when its
    range reaches 1 with a median from 0.95 to 1 (one lucky block alone does not make it so)."""
    close = efficiency.high >= 1.0 and 0.95 <= efficiency.median <= 1.0
    return efficiency_text(efficiency) + (", as fast as pre-made batches within the noise" if close else "")


def cores_used(others: Sequence[float]) -> str:
    """Other processes' cores over several readings as printed: '1.1–1.7', or '1.0' when both ends print alike."""
    low, high = f"{min(others):.1f}", f"{max(others):.1f}"
    return low if low == high else f"{low}–{high}"


def busy_text(load: Any) -> str:
    """' Measured on a busy machine: other processes used 0.8 of 2 cores during this measurement.' for a load
    reading (helpers.loadmeter) taken while other processes kept the cores busy; empty for a quiet one or None."""
    return f" Measured on a busy machine: {load.note()}." if load is not None and load.busy else ""


def result_load_text(results: Sequence[PipelineResult]) -> str:
    """A sentence for PipelineResults measured while other processes kept the machine busy (empty when none was)."""
    busy = [r.load for r in results if r.load is not None and r.load.busy]
    return f" Measured on a busy machine: {busy[0].note()}." if busy else ""
