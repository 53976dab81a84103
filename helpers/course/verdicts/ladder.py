"""Verdicts on a loader ladder's rows (02, 04, 07 and `python -m helpers.course.bench`): rows found by their role, the ladder
read like for like, and the sentence for rungs measured on a busy machine."""

from __future__ import annotations

from collections.abc import Sequence

from ..ladder_row import LadderRow
from .text import compare, cores_used, efficiency_verdict


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
    summary = busy_summary(rows)
    return f" Measured on a busy machine ({summary}): these numbers include that load." if summary else ""


def by_role(rows: Sequence[LadderRow], role: str) -> LadderRow:
    """The ladder row with this role (an error naming the roles there are when no rung has it)."""
    for row in rows:
        if row.role == role:
            return row
    raise KeyError(f"no ladder rung has the role {role!r}; the rungs' roles are {[r.role for r in rows]}")


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
                f"The ceiling '{ceiling.name}' measured slower than '{bounded.name}', which it bounds "
                f"({'; '.join(slower)}): that difference is this machine's noise, not a ranking."
            )
    return lines, left_out


def ladder_verdict(rows: Sequence[LadderRow], *, first: str = "seed post") -> str:
    """02, 04: the ladder read like for like: loader-only rates against the rung with role `first` (with ranges;
    overlapping ones named as noise), end to end among rungs that feed the same model (fastest against the next, with
    ranges), ceilings that measured slower than what they bound named as noise, and which rungs' models differ."""
    base = by_role(rows, first)
    parts = [f"'{r.name}' {compare(r.loader, base.loader, pick=(r.name, base.name))}" for r in rows if r is not base]
    lines = [f"Loader alone, against '{base.name}': " + "; ".join(parts) + "."]
    noise, left_out = _ceiling_noise(rows)
    same_model = [r for r in rows if not r.model_note and id(r) not in left_out]
    if len(same_model) >= 2:
        fast, runner_up = sorted(same_model, key=lambda r: r.fed_samples_per_s, reverse=True)[:2]
        ratio = compare(fast.fed, runner_up.fed, pick=(fast.name, runner_up.name))
        lines.append(
            "End to end, feeding the same model: "
            + ", ".join(f"'{r.name}' {r.fed.text()}" for r in same_model)
            + f" samples/s; the fastest, '{fast.name}', against the next, '{runner_up.name}': {ratio}. "
            "Pipeline efficiency (fed / pre-made): "
            + "; ".join(f"'{r.name}' {efficiency_verdict(r.efficiency)}" for r in same_model)
            + "."
        )
    lines += noise
    for note in dict.fromkeys(r.model_note for r in rows if r.model_note):
        names = " and ".join(f"'{r.name}'" for r in rows if r.model_note == note)
        lines.append(f"{names} feed{'s' if ' and ' not in names else ''} another model: {note}.")
    return " ".join(lines) + load_text(rows)
