"""07's verdicts: how many crop boxes decode at reduced size, one sentence per rung of the folder ladder, and the
storage formats side by side."""

from __future__ import annotations

from ...bottleneck import Shares, reason_text
from ...spread import WITHIN_NOISE
from ..ladder_row import LadderRow
from .ladder import by_role, label
from .text import compare


def reduction_text(reduced_share: float, pixel_share: float, crop: int) -> str:
    """07: how many RandomResizedCrop boxes decode at reduced size and the median share of pixels decoded; when none
    does, that the reduced-decoding rung then decodes at full size, so draft mode plays no part in its number."""
    text = (
        f"{100 * reduced_share:.0f}% of {crop}-px RandomResizedCrop boxes decode at reduced size; the median box "
        f"decodes {100 * pixel_share:.0f}% of the pixels a full decode does"
    )
    if reduced_share == 0:
        text += (
            f". At these sizes no box shrinks on the way to {crop} px, so the 'box first' rung decodes every file "
            "whole: what it gains over the post's is the jitter moved to the device"
        )
    return text + "."


def folder_rung_verdicts(rows: list[LadderRow]) -> list[str]:
    """07: one short line per rung beside the table, in the rungs' short names: its loader-alone rate against the
    post's rung (role "post"), round by round, and what the doctor reads on its numbers."""
    post = by_role(rows, "post")
    lines = []
    for row in rows:
        doctor = _doctor(row)
        if row is post:
            lines.append(f"'{label(row)}' is the reference; the doctor reads {doctor}.")
            continue
        ratio = compare(row.loader, post.loader, pick=(label(row), label(post)))
        lines.append(f"'{label(row)}', loader alone against '{label(post)}': {ratio}; the doctor reads {doctor}.")
    return lines


def _doctor(row: LadderRow) -> str:
    """The doctor's label on the row and the number it rests on: 'INPUT-BOUND (sure): 12% of each fed step waits'."""
    verdict = row.doctor.split(":")[0]
    if not verdict:
        return "nothing"
    label = verdict.split(" (")[0]
    shares = Shares.of(row.data_wait_ms, row.compute_ms, row.premade_step_ms or 0.0, efficiency=row.pipeline_efficiency)
    return f"{verdict}: {reason_text(label, shares)}"


def storage_verdict(rows: list[LadderRow]) -> str:
    """07: the folder (box first), the pre-resized store and the shards side by side, loader alone, found in
    the ladder's rows by their roles."""
    by_key = {
        key: by_role(rows, role)
        for key, role in (("box-first folder", "box first"), ("store", "store"), ("shards", "shards"))
    }
    ranked = sorted(by_key.items(), key=lambda item: -item[1].loader_samples_per_s)
    (best, top), (runner_up, second) = ranked[0], ranked[1]
    ratio = compare(top.loader, second.loader, pick=(best, runner_up))
    head = (
        f"{best} against {runner_up}, {ratio}"
        if ratio.startswith(WITHIN_NOISE)
        else f"{best} is fastest here, against {runner_up} {ratio}"
    )
    rates = ", ".join(f"{key} {row.loader.text()} samples/s" for key, row in by_key.items())
    return f"On this machine's local disk, loader alone: {head} ({rates})."
