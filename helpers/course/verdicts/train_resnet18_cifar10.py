"""06's verdicts: the post's set-up against the course's over the same steps, and the accuracy the budget bought."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...spread import Spread
from .text import busy_text, compare


def same_steps_verdict(
    *,
    post_rates: Sequence[float],
    course_rates: Sequence[float],
    post_px: int,
    course_px: int,
    post_batch: int,
    course_batch: int,
    same_network: bool,
    load: Any = None,
) -> str:
    """06: the post's set-up against the course's over the same steps (medians over interleaved rounds, with ranges),
    what differs between them besides the loader, the pixel ratio of their inputs, and the load meter's line when
    other processes used the cores during the timings (`load`)."""
    post, course = Spread.paired(post_rates), Spread.paired(course_rates)  # interleaved rounds: round by round
    ratio = compare(course, post, pick=("the course's", "the post's"))
    differs = [
        "the loader",
        f"the input size ({(post_px / course_px) ** 2:.0f}x the pixels)",
    ]
    if not same_network:
        positions = (post_px / 4 / course_px) ** 2  # the ImageNet stem (stride-2 conv, stride-2 pool) divides by 4
        differs.append(f"the network (the post's ImageNet stem: its blocks see {positions:.1f}x the positions)")
    if post_batch != course_batch:
        differs.append(f"the batch ({post_batch} against {course_batch})")
    return (
        f"The course's set-up against the post's, images/s: {ratio}. They differ in {', '.join(differs[:-1])} and "
        f"{differs[-1]}, so the ratio is the set-ups', not the loader's alone." + busy_text(load)
    )


def accuracy_verdict(history: Sequence[dict[str, Any]], *, classes: int, data: str) -> str:
    """06: the final top-1 against chance, and when the run first passed half of its final accuracy."""
    final = history[-1]
    text = (
        f"Top-1 {100 * final['top1']:.1f}% on the test split of {data} after {final['trained_seconds']:.0f} s of "
        f"training ({final['optimizer_steps']} steps), against {100 / classes:.0f}% chance"
    )
    if len(history) < 2:
        return text + "; the budget bought one evaluation, so the curve is a single point."
    half = next(h for h in history if h["top1"] >= final["top1"] / 2)
    return text + (
        f"; half of that top-1 ({50 * final['top1']:.1f}%) was reached by {half['trained_seconds']:.0f} s, the first "
        f"of the {len(history)} evaluations at or above it (it may have been reached earlier, between evaluations)."
    )
