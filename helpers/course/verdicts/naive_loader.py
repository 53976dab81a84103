"""01's verdicts: the traditional store's memory and disk against the uint8 cache, and the doctor before and after one
change."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...bottleneck import reason_text
from ...diagnosis import Diagnosis
from ...spread import ratio_text
from .text import compare


def memory_verdict(rows: Sequence[dict[str, Any]], *, claimed_input_ratio: float) -> str:
    """01: how much the traditional float32 store holds against the uint8 cache, at each scale, and the model inputs
    against the seed's claimed ratio."""
    parts = [
        f"x{r['scale']}: {r['traditional_mib']:.0f} MiB against {r['cache_mib']:.0f} MiB ({ratio_text(r['total_ratio'])})"
        for r in rows
    ]
    largest = max(rows, key=lambda r: r["scale"])
    inputs = largest["input_ratio"]
    relation = (
        "more than"
        if inputs > claimed_input_ratio * 1.05
        else "less than"
        if inputs < claimed_input_ratio * 0.95
        else "about"
    )
    return (
        f"Traditional float32 store against the uint8 cache, same images: {'; '.join(parts)}. At x{largest['scale']} "
        f"the model inputs alone are {inputs:.0f}x the uint8 LR they encode: {relation} the {claimed_input_ratio:.0f}x "
        "claimed"
        + (
            ", because the claim counts pixels and the store holds each as a 4-byte float."
            if relation == "more than"
            else "."
        )
    )


def doctor_change_verdict(before: Diagnosis, after: Diagnosis, *, change: str) -> str:
    """01: the doctor on one training loop before and after one change: fed rates with their ranges over blocks, the
    ratio with its range (within the noise when the ranges overlap), and what the doctor read each time (diagnoses
    from helpers.doctor.diagnose)."""
    a, b = after.fed_samples_per_s, before.fed_samples_per_s
    ratio = compare(a, b, pick=(f"with {change}", "before"))
    read = f"{before.verdict.lower()} before and {after.verdict.lower()} after"
    if before.verdict != after.verdict and a.ties(b):  # the same loop, either side of a label's line
        read = (
            f"{before.verdict.lower()} before ({reason_text(before.verdict, before.shares)}) and "
            f"{after.verdict.lower()} after ({reason_text(after.verdict, after.shares)}): either side of a line"
        )
    return (
        f"With {change}, the loop was fed {a.text(1, unit='samples/s')} against {b.text(1)} "
        f"before (medians over block pairs): {ratio}. The doctor read {read}."
    )


def disk_verdict(*, written: float, original: float, read: float, decoded: float, used: float) -> str:
    """01: what the traditional preprocessing wrote, and what each sample reads and decodes against what it keeps."""
    return (
        f"Preprocessing wrote {written / 2**20:.1f} MiB of upscaled PNGs for {original / 2**20:.1f} MiB of source "
        f"JPEGs ({ratio_text(written / original)}). Each sample reads {read / 2**10:.0f} KiB of files and builds "
        f"{decoded / 2**20:.1f} MiB of float tensors to keep {used / 2**20:.2f} MiB of crops "
        f"({decoded / used:.0f}x what it keeps)."
    )
