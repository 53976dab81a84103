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
    """Timings repeated in interleaved rounds (one per round, the candidates in turn) as a Spread that compares round
    by round with another's; a single number is one measurement, with no range."""
    return Spread.single(float(values)) if isinstance(values, (int, float)) else Spread.paired(values)


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
    """' Busy machine: other processes used 0.8 of 2 cores.' for a load reading (helpers.loadmeter) taken while other
    processes kept the cores busy; empty for a quiet one or None. Short: a verdict says it, the table's footer and
    the lesson's last line give the detail."""
    return busy_clause(f"{load.other_cores:.1f}", load.cores) if busy(load) else ""


def busy_clause(used: str, cores: int) -> str:
    """' Busy machine: other processes used 1.0 of 2 cores.', the one wording every verdict ends with when busy."""
    return f" Busy machine: other processes used {used} of {cores} cores."


def busy(load: Any) -> bool:
    """True for a load reading taken while other processes kept the cores busy."""
    return load is not None and load.busy


def result_load_text(results: Sequence[PipelineResult]) -> str:
    """busy_text for the first of several PipelineResults measured on a busy machine (empty when none was)."""
    return next((busy_text(r.load) for r in results if busy(r.load)), "")
