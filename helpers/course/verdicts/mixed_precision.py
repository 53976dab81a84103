"""03's verdicts: each precision's step time against fp32's and the choice made from it, and what channels_last did."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...spread import Spread, ratio_text
from .text import busy_text, tie_text, timings


def _ratio_range(a: Spread | None, b: Spread | None) -> str:
    """The interval of a/b (round by round where they pair), as text ("" when either has no range)."""
    if a is None or b is None or a.n == 1 or b.n == 1 or b.low <= 0:
        return ""
    ratio = a.ratio(b)
    paired = f" over {ratio.n} paired rounds" if a.pairs_with(b) else ""
    return f" (range {ratio.low:.2f}–{ratio.high:.2f}x{paired}{'; within the noise' if a.ties(b) else ''})"


def _step(row: dict[str, Any]) -> Spread | None:
    """A precision row's step ms over its interleaved rounds (`times`, one per round), or with the range it carries;
    None when it has neither."""
    if row.get("times"):
        return Spread.paired(row["times"])
    bounds = row.get("step_ms_range")
    return Spread.around(row["step_ms"], bounds) if bounds else None


def precision_verdict(results: Sequence[dict[str, Any]], *, device: str, choice: Any = None, load: Any = None) -> str:
    """03: each precision's step time against fp32's (with the interval of the ratio when the rows carry ranges),
    whether it is native here, the losses at a common step, the choice made from the same measurement, and the load
    meter's line when other processes used the cores during it (`load`, a helpers.loadmeter reading)."""
    fp32 = next(r for r in results if r["precision"] == "fp32")
    parts = []
    for r in results:
        if r is fp32:
            continue
        how = "native here" if r["native"] else "not native here (emulated or reference kernels)"
        spread = _ratio_range(_step(r), _step(fp32))
        parts.append(f"{r['precision']} {ratio_text(r['step_ms'] / fp32['step_ms'])} the fp32 step time{spread}, {how}")
    fastest = min(results, key=lambda r: r["step_ms"])
    best = _step(fastest)
    tied = [
        r["precision"]
        for r in results
        if r is not fastest and best is not None and (step := _step(r)) is not None and step.ties(best)
    ]
    ranking = (
        f" {fastest['precision']}, the fastest median, is within the noise of {' and '.join(tied)}: this measurement "
        "cannot tell them apart."
        if tied
        else ""
    )
    return f"On {device}: {'; '.join(parts)}.{ranking}{_choice_text(choice)}" + busy_text(load)


def _choice_text(choice: Any) -> str:
    """The precision kept and why, from the same timings as the table: after a tie, plainly which one the course
    keeps (fp32, the default, unless another is measurably faster)."""
    if choice is None:
        return ""
    if not getattr(choice, "within_noise", False):
        return f" The course keeps {choice.precision}, measurably the fastest native precision in these timings."
    others = " or ".join(p for p in choice.step_ms if p != choice.precision)
    why = (
        f"full precision, since {others} is not measurably faster in these timings"
        if choice.precision == "fp32"
        else "the lower median of the precisions these timings cannot tell apart"
    )
    return f" The course keeps {choice.precision}, {why}."


def channels_last_verdict(table: dict[tuple[str, str], Any], *, load: Any = None) -> str:
    """03: what channels_last did to the step time, per precision: a median ratio, and with repeated interleaved
    timings (lists of ms) the interval of the ratio and whether it is within the noise; the load meter's line when
    other processes used the cores during the timings (`load`)."""
    parts = []
    for precision in dict.fromkeys(p for _, p in table):
        nchw, last = timings(table[("NCHW", precision)]), timings(table[("channels_last", precision)])
        spread = _ratio_range(nchw, last)
        tie = (
            tie_text(
                ("NCHW", "channels_last"),
                (
                    "channels_last",
                    "the layout the course's CIFAR recipe trains in, since NCHW is not measurably faster here",
                ),
            )
            if nchw.n != 1 and last.n != 1 and nchw.ties(last)
            else ""
        )
        apart = not tie and nchw.median != last.median
        faster = (" (channels_last faster)" if nchw.median > last.median else " (NCHW faster)") if apart else ""
        ratio = ratio_text(nchw.median / last.median)
        parts.append(f"{precision}: NCHW step {ratio} the channels_last step{spread}{faster}{tie}")
    return "channels_last here: " + "; ".join(parts) + "." + busy_text(load)
