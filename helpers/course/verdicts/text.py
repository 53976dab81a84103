"""The words every lesson's verdicts share: a ratio as a reader says it, a median with its range, a ratio with its
range that says when two measurements are within the noise, a pipeline efficiency that never reads above 1, and the
sentence for a measurement taken on a busy machine."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any


def ratio_text(ratio: float) -> str:
    """A ratio as a reader says it: '3.2x more' or '0.6x (less)'."""
    return f"{ratio:.1f}x" if round(ratio, 2) >= 1 else f"{ratio:.2f}x (less)"  # never "1.00x (less)"


def median_range(values: float | Sequence[float]) -> tuple[float, tuple[float, float] | None]:
    """A median and its range from repeated timings (a single number has no range)."""
    if isinstance(values, (int, float)):
        return float(values), None
    return statistics.median(values), (min(values), max(values))


def ranges_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when two (low, high) ranges over rounds overlap: their difference is within the noise seen."""
    return a[0] <= b[1] and b[0] <= a[1]


def span_text(value: float, spread: tuple[float, float] | None, digits: int = 0) -> str:
    """'400 (380–420)': a median with its range over rounds or blocks."""
    if spread is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} ({spread[0]:.{digits}f}–{spread[1]:.{digits}f})"


def ratio_with_range(
    a: float,
    a_range: tuple[float, float],
    b: float,
    b_range: tuple[float, float],
    *,
    pick: tuple[str, str] | None = None,
    lower_is_better: bool = False,
    keep: tuple[str, str] | None = None,
) -> str:
    """a against b as a ratio with its range (lowest over highest to highest over lowest); when the two ranges overlap
    it says so: 'within the noise of this machine', and, given `pick` (a's name, b's name), that this measurement
    cannot tell the two apart here; given `keep` too (the name kept, and why), which one the course keeps and why.
    (`lower_is_better` is kept for callers: a tie names no winner, whichever way round is better.)"""
    low, high = a_range[0] / b_range[1], a_range[1] / b_range[0]
    if a_range[0] == a_range[1] and b_range[0] == b_range[1]:
        return f"{ratio_text(a / b)} (one measurement each: no range)"
    shown = ratio_text(a / b)
    if a / b >= 1 and not low <= round(a / b, 1) <= high:  # rounded to one place it would fall outside its own range
        shown = f"{a / b:.2f}x"
    text = f"{shown} (range {low:.2f}–{high:.2f}x)"
    if not ranges_overlap(a_range, b_range):
        return text
    return f"within the noise of this machine: measured {text}{tie_text(pick, keep)}"


def tie_text(names: tuple[str, str] | None, keep: tuple[str, str] | None = None) -> str:
    """After a result within the noise: '; this measurement cannot tell 'a' and 'b' apart on this machine', and with
    `keep` (a name and why) ', so the course keeps 'a', why'."""
    if names is None:
        return ""
    text = f"; this measurement cannot tell '{names[0]}' and '{names[1]}' apart on this machine"
    return text + (f": the course keeps '{keep[0]}', {keep[1]}" if keep else "")


def _efficiency(row: Any) -> tuple[float, float, float]:
    """(median, low, high) of a ladder row's or a PipelineResult's pipeline efficiency."""
    get: Callable[[str], Any] = row.get if isinstance(row, dict) else lambda key: getattr(row, key, None)
    median = get("pipeline_efficiency")
    low, high = get("efficiency_range") or (median, median)
    return median, low, high


def efficiency_text(row: Any) -> str:
    """A rung's pipeline efficiency with its range, never above 1 as a number: a median above 1 reads '1.0 within the
    noise (measured 1.38, ...)'; a range whose top passes 1 says that part is noise; and it is as fast as pre-made
    batches within the noise only with a median of at least 0.95 (one lucky block alone does not make it so)."""
    median, low, high = _efficiency(row)
    if median > 1:
        return f"1.0 within the noise (measured {median:.2f}, range {low:.2f}–{high:.2f})"
    text = f"{median:.2f} ({low:.2f}–{high:.2f}{'; above 1 only by noise' if high > 1 else ''})"
    return text + (", as fast as pre-made batches within the noise" if high >= 1.0 and median >= 0.95 else "")


def efficiency_cell(row: Any) -> str:
    """A table cell for a pipeline efficiency: the same rule as efficiency_text, short."""
    median, low, high = _efficiency(row)
    if median > 1:
        return f"1.0 within noise (measured {median:.2f}; {low:.2f}–{high:.2f})"
    return f"{median:.2f} ({low:.2f}–{high:.2f}{', >1 is noise' if high > 1 else ''})"


def cores_used(others: Sequence[float]) -> str:
    """Other processes' cores over several readings as printed: '1.1–1.7', or '1.0' when both ends print alike."""
    low, high = f"{min(others):.1f}", f"{max(others):.1f}"
    return low if low == high else f"{low}–{high}"


def busy_text(load: Any) -> str:
    """' Measured on a busy machine: other processes used 0.8 of 2 cores during this measurement.' for a load
    reading (helpers.loadmeter) taken while other processes kept the cores busy; empty for a quiet one or None."""
    return f" Measured on a busy machine: {load.note()}." if load is not None and load.busy else ""


def result_load_text(results: Sequence[Any]) -> str:
    """A sentence for PipelineResults measured while other processes kept the machine busy (empty when none was)."""
    busy = [r.load for r in results if getattr(r, "load", None) is not None and r.load.busy]
    return f" Measured on a busy machine: {busy[0].note()}." if busy else ""
