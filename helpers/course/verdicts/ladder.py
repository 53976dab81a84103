"""Verdicts on a loader ladder's rows (02, 04, 07 and `python -m helpers.course.bench`): rows found by their role, the ladder
read like for like, and the sentence for rungs measured on a busy machine."""

from __future__ import annotations

from collections.abc import Sequence

from ..ladder_row import LadderRow
from .text import busy_clause, compare, cores_used


def busy_summary(rows: Sequence[LadderRow]) -> str:
    """'other processes used 1.1–1.7 of 2 cores during the measurements of every rung' for the rows measured while
    the machine was busy (their `load_note`), or an empty string when none was."""
    busy = [r for r in rows if r.load_note]
    if not busy:
        return ""
    loads = [r.load for r in busy if r.load]
    if len(loads) < len(busy):
        return "; ".join(f"'{r.name}': {r.load_note}" for r in busy)
    used = cores_used([load["other_cores"] for load in loads])
    which = "every rung" if len(busy) == len(rows) else ", ".join(f"'{r.name}'" for r in busy)
    return f"other processes used {used} of {loads[0]['cores']} cores during the measurements of {which}"


def load_text(rows: Sequence[LadderRow]) -> str:
    """A sentence for the rungs measured while other processes kept the machine busy (empty when none was)."""
    loads = [r.load for r in rows if r.load_note and r.load]
    if not loads:
        return ""
    return busy_clause(cores_used([x["other_cores"] for x in loads]), loads[0]["cores"])


def by_role(rows: Sequence[LadderRow], role: str) -> LadderRow:
    """The ladder row with this role (an error naming the roles there are when no rung has it)."""
    for row in rows:
        if row.role == role:
            return row
    raise KeyError(f"no ladder rung has the role {role!r}; the rungs' roles are {[r.role for r in rows]}")


def label(row: LadderRow) -> str:
    """A rung's short name, as its table shows it in bold: its role, or its name where it has none."""
    return row.role or row.name


def _ceiling_noise(rows: Sequence[LadderRow]) -> tuple[list[str], set[int]]:
    """Sentences for ceiling rungs that measured slower than the rung they bound (noise, not a ranking), and the ids
    of those ceilings, which the end-to-end ranking leaves out."""
    lines, left_out = [], set()
    for ceiling in (r for r in rows if r.bounds):
        bounded = by_role(rows, ceiling.bounds)
        slower = [
            f"{what} {mine:.0f} against {theirs:.0f} samples/s"
            for what, mine, theirs in (
                ("loader alone", ceiling.loader_samples_per_s, bounded.loader_samples_per_s),
                ("end to end", ceiling.fed_samples_per_s, bounded.fed_samples_per_s),
            )
            if mine < theirs
        ]
        if slower:
            left_out.add(id(ceiling))
            lines.append(
                f"The ceiling '{label(ceiling)}' measured slower than '{label(bounded)}', which it bounds "
                f"({'; '.join(slower)}): this machine's noise, not a ranking."
            )
    return lines, left_out


def ladder_verdict(rows: Sequence[LadderRow], *, first: str = "seed post") -> str:
    """02, 04: the ladder beside its table, in the rungs' short names: the fastest loader alone against the rung with
    role `first`, and end to end, among the rungs that feed the same model, the fastest against the next (round by
    round, within the noise named as such); a ceiling that measured slower than what it bounds is named as noise.
    The efficiencies, the rungs that train another model and the load's detail are the table's."""
    base = by_role(rows, first)
    top = max(rows, key=lambda r: r.loader_samples_per_s)
    lines = []
    if top is not base:
        ratio = compare(top.loader, base.loader, pick=(label(top), label(base)))
        lines.append(f"Loader alone, the fastest, '{label(top)}', against '{label(base)}': {ratio}.")
    noise, left_out = _ceiling_noise(rows)
    same_model = [r for r in rows if not r.model_note and id(r) not in left_out]
    if len(same_model) >= 2:
        fast, runner_up = sorted(same_model, key=lambda r: r.fed_samples_per_s, reverse=True)[:2]
        ratio = compare(fast.fed, runner_up.fed, pick=(label(fast), label(runner_up)))
        lines.append(
            f"End to end on the same model, the fastest, '{label(fast)}', against '{label(runner_up)}': {ratio}."
        )
    return " ".join(lines + noise) + load_text(rows)


def min_model_verdict(rows: Sequence[LadderRow], *, within: float = 0.2) -> str:
    """02, 04: how well min(loader alone, step on pre-made batches) predicts each rung's fed rate: the rungs it
    predicts within `within` (a fraction), and the one furthest below it, where loader and step share the cores or
    the loader delivers in bursts."""
    # to two places, as a reader divides the printed rates: 0.798 is the 0.80 they compute, within 20%
    ratios = {
        label(r): round(r.fed_samples_per_s / min(r.loader_samples_per_s, r.premade_samples_per_s), 2) for r in rows
    }
    close = [name for name, ratio in ratios.items() if abs(ratio - 1) <= within]
    worst, lowest = min(ratios.items(), key=lambda item: item[1])
    text = (
        f"min(loader alone, step on pre-made batches) predicts the fed rate within {within:.0%} for {len(close)} of "
        f"{len(rows)} rungs"
    )
    if lowest < 1 - within:
        text += (
            f"; '{worst}' fed {lowest:.2f}x its prediction: there the loader and the step do not overlap fully "
            "(they share the cores, or its batches arrive in bursts)"
        )
    return text + "."
