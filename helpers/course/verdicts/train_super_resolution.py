"""05's verdicts: LR made by each library against MATLAB's, two pipelines end to end against the post's claim, device
memory under autocast and in the allocator, and the trained model's gain over bicubic."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import torch

from ...bottleneck import MS_AGREE
from ...pipeline_result import PipelineResult
from ...spread import ratio_text
from .text import compare, result_load_text


def sr_verdict(gains: Sequence[float], *, data: str, held_out: Sequence[int] | None = None) -> str:
    """05: the per-image gain over the bicubic baseline: mean, range, and on how many images it was positive; when
    only the images at `held_out` share nothing with training (a stand-in's tiles of half-trained photographs are
    the others), their gain leads and the rest's follows, each on its own."""

    def part(group: Sequence[float], what: str) -> str:
        return (
            f"{what}: mean {statistics.mean(group):+.2f} dB (from {min(group):+.2f} to {max(group):+.2f}), above "
            f"bicubic on {sum(g > 0 for g in group)} of {len(group)}"
        )

    if held_out and len(held_out) < len(gains):
        unseen = [gains[i] for i in held_out]
        seen = [g for i, g in enumerate(gains) if i not in held_out]
        return (
            f"Gain over the MATLAB bicubic baseline ({data}). "
            + part(unseen, f"On the {len(unseen)} photographs held out whole")
            + ". "
            + part(seen, f"On the {len(seen)} tiles of photographs whose other half trained")
            + ": those resemble the training data, so they flatter the model."
        )
    return f"Gain over the MATLAB bicubic baseline ({data}): " + part(gains, f"on {len(gains)} test images") + "."


def pipelines_claim_verdict(measured: dict[str, PipelineResult], *, claimed_before: float, claimed_after: float) -> str:
    """05: two pipelines feeding the same model, end to end (with ranges over interleaved blocks), then the post's own
    before/after, which was measured elsewhere (its hardware, its 'before')."""
    (before_name, before), (after_name, after) = measured.items()
    ratio = compare(after.fed, before.fed, pick=(after_name, before_name))
    return (
        f"End to end, feeding the same model: '{after_name}' {after.fed.text(1)} images/s against '{before_name}' "
        f"{before.fed.text(1)}, {ratio}. The post reported {claimed_before:g} -> {claimed_after:g} images/s "
        f"({ratio_text(claimed_after / claimed_before)}) between its own before and after, on its GPU: not measured "
        "here." + result_load_text([before, after])
    )


def batch_layout(tensor: Any) -> str:
    """How a batch's tensor lies in memory, as the step sees it: 'channels_last', 'NCHW' or 'strided'."""
    if tensor.is_contiguous(memory_format=torch.channels_last) and not tensor.is_contiguous():
        return "channels_last"
    return "NCHW" if tensor.is_contiguous() else "strided"


def pipelines_table_notes(
    measured: dict[str, PipelineResult],
    *,
    layouts: dict[str, str] | None = None,
    over: float = 0.10,
    off: float = MS_AGREE,
) -> list[str]:
    """05: what a reader checking the table's columns needs: where pre-made / (wait + compute) is more than `off` from
    a row's efficiency, why (the efficiency is the median of the block pairs' ratios, the ms means over every step);
    and when the pipelines' pre-made steps (one model) differ by more than `over`, their times and what differs: each
    times the step on its own loader's batches, so their `layouts` (batch_layout) when they differ."""
    notes = []
    for name, r in measured.items():
        columns = r.premade_step_ms / (r.data_wait_ms + r.compute_ms) if r.premade_step_ms else None
        if columns is not None and abs(columns - r.pipeline_efficiency) > off:
            notes.append(
                f"'{name}': pre-made / (wait + compute) is {columns:.2f} against its efficiency "
                f"{r.pipeline_efficiency:.2f}, the median of its block pairs' ratios: the ms are means over every "
                "step, where a slow block weighs in."
            )
    steps = {name: r.premade_step_ms for name, r in measured.items() if r.premade_step_ms}
    if len(steps) >= 2 and max(steps.values()) > (1 + over) * min(steps.values()):
        times = " and ".join(f"{ms:.1f}" for ms in steps.values())
        gap = f"{max(steps.values()) / min(steps.values()) - 1:.0%}"
        shown = {name: (layouts or {}).get(name) for name in steps}
        if len(set(shown.values())) > 1 and None not in shown.values():
            why = (
                "each pipeline times the step on its own loader's batches, and they arrive as "
                + " and ".join(str(layout) for layout in shown.values())
                + ": the layout is part of what each pipeline costs the step"
            )
        else:
            why = (
                "the same batches' layout, so the spread between blocks on this machine, which each efficiency carries"
            )
        notes.append(
            f"The same step on pre-made batches took {times} ms in the two pipelines' turns, {gap} apart: {why}."
        )
    return notes


def resize_verdict(rows: Sequence[dict[str, Any]], *, scale: int, published_gap_db: float) -> str:
    """05: how far each library's LR is from the protocol's MATLAB LR, and how much the bicubic baseline moves with
    the library, against the smallest gap between two published methods."""
    measured = [r for r in rows if r["lr_psnr_vs_matlab"] is not None and not r["way"].startswith("MATLAB")]
    missing = [f"{r['way']}: {r['note']}" for r in rows if r["lr_psnr_vs_matlab"] is None]
    parts = [
        f"{r['way']} {r['lr_psnr_vs_matlab']:.1f} dB" for r in sorted(measured, key=lambda r: -r["lr_psnr_vs_matlab"])
    ]
    baselines = [r["baseline_psnr"] for r in rows if r["baseline_psnr"] is not None]
    spread = max(baselines) - min(baselines)
    text = (
        f"x{scale} LR images made from the same HR, PSNR-Y against MATLAB's LR (higher: closer to the protocol): "
        + "; ".join(parts)
        + f". The bicubic baseline computed from each LR spans {spread:.2f} dB, "
        + (
            f"more than the {published_gap_db:.2f} dB between the two closest published methods: a row scored on LR "
            "from another library than the test set's would not compare with the table."
            if spread > published_gap_db
            else f"less than the {published_gap_db:.2f} dB between the two closest "
            "published methods: on these images the library would not reorder the table."
        )
    )
    return text + (" Not measured: " + "; ".join(missing) + "." if missing else "")


def amp_memory_verdict(rows: Sequence[dict[str, Any]], *, claimed_before_gb: float, claimed_after_gb: float) -> str:
    """05 (CUDA): peak device memory under autocast against fp32, against the post's claimed drop."""
    fp32 = next(r for r in rows if r["precision"] == "fp32")
    parts = [
        f"{r['precision']} {r['peak_mib']:.0f} MiB ({r['peak_mib'] / fp32['peak_mib']:.2f}x fp32)"
        for r in rows
        if r is not fp32
    ]
    claimed = claimed_after_gb / claimed_before_gb
    return (
        f"Peak device memory of two training steps: fp32 {fp32['peak_mib']:.0f} MiB; "
        + "; ".join(parts)
        + f". The BSD100 post claims {claimed_before_gb} GB -> {claimed_after_gb} GB ({claimed:.2f}x) for its model."
    )


def allocator_verdict(rows: Sequence[dict[str, Any]]) -> str:
    """05 (CUDA): what `del` and `empty_cache()` changed in the allocator's allocated and reserved memory, and which
    habit grew allocated memory over the steps."""
    by = {r["what"]: r for r in rows}
    made, freed, emptied = by["a 256 MiB tensor allocated"], by["after del"], by["after del, then empty_cache()"]
    loops = [r for r in rows if "forward passes" in r["what"]]
    growth = [
        f"{r['what'].split(', ', 1)[1]}: {r['allocated_mib'] - emptied['allocated_mib']:+.0f} MiB allocated"
        for r in loops
    ]
    return (
        f"del returned {made['allocated_mib'] - freed['allocated_mib']:.0f} MiB to PyTorch's cache (reserved "
        f"memory changed by {freed['reserved_mib'] - made['reserved_mib']:+.0f} MiB); empty_cache() then gave "
        f"{freed['reserved_mib'] - emptied['reserved_mib']:.0f} MiB back to the driver. Over the steps: "
        + "; ".join(growth)
        + "."
    )
