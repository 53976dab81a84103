"""Verdicts on a loader ladder's rows (02, 04, 07 and `python -m helpers.course.bench`): rows found by their role, the ladder
read like for like, and the sentence for rungs measured on a busy machine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .text import cores_used, efficiency_text, ratio_with_range, span_text


def busy_summary(rows: Sequence[dict[str, Any]]) -> str:
    """'other processes used 1.1–1.7 of 2 cores during the measurements of every rung' for the rows measured while
    the machine was busy (their `load_note`), or an empty string when none was."""
    busy = [r for r in rows if r.get("load_note")]
    if not busy:
        return ""
    if not all(r.get("load") for r in busy):
        return "; ".join(f"'{r['name']}': {r['load_note']}" for r in busy)
    others = [r["load"]["other_cores"] for r in busy]
    used = cores_used(others)
    which = "every rung" if len(busy) == len(rows) else ", ".join(f"'{r['name']}'" for r in busy)
    return f"other processes used {used} of {busy[0]['load']['cores']} cores during the measurements of {which}"


def load_text(rows: Sequence[dict[str, Any]]) -> str:
    """A sentence for the rungs measured while other processes kept the machine busy (empty when none was)."""
    summary = busy_summary(rows)
    return f" Measured on a busy machine ({summary}): these numbers include that load." if summary else ""


def by_role(rows: Sequence[dict[str, Any]], role: str) -> dict[str, Any]:
    """The ladder row with this role (an error naming the roles there are when no rung has it)."""
    for row in rows:
        if row.get("role") == role:
            return row
    raise KeyError(f"no ladder rung has the role {role!r}; the rungs' roles are {[r.get('role') for r in rows]}")


def rate_of(row: dict[str, Any], key: str) -> tuple[float, tuple[float, float]]:
    return row[key], row.get(f"{key}_range") or (row[key], row[key])


def _ceiling_noise(rows: Sequence[dict[str, Any]]) -> tuple[list[str], set[int]]:
    """Sentences for ceiling rungs that measured slower than the rung they bound (noise, not a ranking), and the ids
    of those ceilings, which the end-to-end ranking leaves out."""
    lines, left_out = [], set()
    for ceiling in (r for r in rows if r.get("bounds")):
        bounded = by_role(rows, ceiling["bounds"])
        slower = [
            f"{what} {ceiling[key]:.0f} against {bounded[key]:.0f} samples/s"
            for key, what in (("loader_samples_per_s", "loader alone"), ("fed_samples_per_s", "end to end"))
            if ceiling[key] < bounded[key]
        ]
        if slower:
            left_out.add(id(ceiling))
            lines.append(
                f"The ceiling '{ceiling['name']}' measured slower than '{bounded['name']}', which it bounds "
                f"({'; '.join(slower)}): that difference is this machine's noise, not a ranking."
            )
    return lines, left_out


def ladder_verdict(rows: Sequence[dict[str, Any]], *, first: str = "seed post") -> str:
    """02, 04: the ladder read like for like: loader-only rates against the rung with role `first` (with ranges;
    overlapping ones named as noise), end to end among rungs that feed the same model (fastest against the next, with
    ranges), ceilings that measured slower than what they bound named as noise, and which rungs' models differ."""
    base = by_role(rows, first)
    parts = []
    for r in rows:
        if r is not base:
            ratio = ratio_with_range(
                *rate_of(r, "loader_samples_per_s"),
                *rate_of(base, "loader_samples_per_s"),
                pick=(r["name"], base["name"]),
            )
            parts.append(f"'{r['name']}' {ratio}")
    lines = [f"Loader alone, against '{base['name']}': " + "; ".join(parts) + "."]
    noise, left_out = _ceiling_noise(rows)
    same_model = [r for r in rows if not r["model_note"] and id(r) not in left_out]
    if len(same_model) >= 2:
        fast, runner_up = sorted(same_model, key=lambda r: r["fed_samples_per_s"], reverse=True)[:2]
        ratio = ratio_with_range(
            *rate_of(fast, "fed_samples_per_s"),
            *rate_of(runner_up, "fed_samples_per_s"),
            pick=(fast["name"], runner_up["name"]),
        )
        lines.append(
            "End to end, feeding the same model: "
            + ", ".join(f"'{r['name']}' {span_text(*rate_of(r, 'fed_samples_per_s'))}" for r in same_model)
            + f" samples/s; the fastest, '{fast['name']}', against the next, '{runner_up['name']}': {ratio}. "
            "Pipeline efficiency (fed / pre-made): "
            + "; ".join(f"'{r['name']}' {efficiency_text(r)}" for r in same_model)
            + "."
        )
    lines += noise
    for note in dict.fromkeys(r["model_note"] for r in rows if r["model_note"]):
        names = " and ".join(f"'{r['name']}'" for r in rows if r["model_note"] == note)
        lines.append(f"{names} feed{'s' if ' and ' not in names else ''} another model: {note}.")
    return " ".join(lines) + load_text(rows)


LOADER = "loader_samples_per_s"  # a ladder row's loader-alone rate (its range: LOADER + "_range")
