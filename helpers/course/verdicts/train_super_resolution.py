"""05's verdicts: LR made by each library against MATLAB's, two pipelines end to end against the post's claim, device
memory under autocast and in the allocator, and the trained model's gain over bicubic."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from ...pipeline_result import PipelineResult
from ...spread import ratio_text
from .text import compare, result_load_text


def sr_verdict(gains: Sequence[float], *, data: str) -> str:
    """05: the per-image gain over the bicubic baseline: mean, spread, range, and on how many images it was positive."""
    spread = statistics.stdev(gains) if len(gains) > 1 else 0.0
    return (
        f"Gain over the MATLAB bicubic baseline on {len(gains)} test images ({data}): mean {statistics.mean(gains):+.2f} "
        f"dB, median {statistics.median(gains):+.2f}, standard deviation {spread:.2f}, from {min(gains):+.2f} to {max(gains):+.2f}; the model scored above "
        f"bicubic on {sum(g > 0 for g in gains)} of {len(gains)} images."
    )


def pipelines_claim_verdict(measured: dict[str, PipelineResult], *, claimed_before: float, claimed_after: float) -> str:
    """05: two pipelines feeding the same model, end to end (with ranges over interleaved blocks), then the post's own
    before/after, which was measured elsewhere (its hardware, its 'before')."""
    (before_name, before), (after_name, after) = measured.items()
    ratio = compare(after.fed, before.fed, pick=(after_name, before_name))
    return (
        f"End to end, feeding the same model: '{after_name}' {after.fed.text(1)} images/s against '{before_name}' "
        f"{before.fed.text(1)}, {ratio}; data-wait per step {after.data_wait.text(1)} ms against "
        f"{before.data_wait.text(1)} ms, compute {after.compute.text(1)} ms against {before.compute.text(1)} "
        f"ms. Separately, the post reported {claimed_before:g} -> {claimed_after:g} images/s "
        f"({ratio_text(claimed_after / claimed_before)}) between its own before and after, on its own GPU: not measured here."
        + result_load_text([before, after])
    )


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
