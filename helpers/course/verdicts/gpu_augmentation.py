"""04's verdicts: the CIFAR post's augmentation claim against the ladder, two loaders' rates, and the overlap tables."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from .ladder import by_role, load_text, rate_of
from .text import ranges_overlap, ratio_with_range, span_text


def augmentation_claim_verdict(rows: Sequence[dict[str, Any]], *, claimed_ratio: float, device: str) -> str:
    """04: the CIFAR post's claimed augmentation speed-up against the loaders measured on their own (decode and
    augment), like for like at 32 px first ("native size" against "device"), then the post's 224-px pipeline ("seed
    post"), every ratio with its range; says when no GPU was measured."""
    post, native, device_rung = by_role(rows, "seed post"), by_role(rows, "native size"), by_role(rows, "device")
    where = (
        f"on {device}"
        if not device.startswith("cpu")
        else "on the CPU: here the 'device' is the CPU itself, so this run measured no GPU"
    )
    kornia = rate_of(device_rung, "loader_samples_per_s")
    same = ratio_with_range(*kornia, *rate_of(native, "loader_samples_per_s"), pick=("kornia", "per-sample PIL"))
    against_post = ratio_with_range(*kornia, *rate_of(post, "loader_samples_per_s"))
    return (
        f"The post claimed {claimed_ratio:.0f}x less augmentation time from moving it to the GPU; its pipeline runs per "
        f"sample on the CPU. Loader alone (decode + augment), measured {where}. At the same 32 px: kornia on the whole "
        f"dataset {span_text(*kornia)} images/s against per-sample PIL {span_text(*rate_of(native, 'loader_samples_per_s'))}, "
        f"{same}; the PIL loader decodes a PNG file "
        "per sample as well, the on-device one holds decoded pixels, so this ratio is decoding and augmentation "
        f"together. The post's own pipeline (224 px) delivered {span_text(*rate_of(post, 'loader_samples_per_s'))} images/s: "
        f"kornia at 32 px {against_post} that, a ratio that mixes moving the augmentation with shrinking the crop 49x "
        f"in pixels. End to end, feeding the same network: {span_text(*rate_of(post, 'fed_samples_per_s'))} (224-px inputs, "
        f"at the batch its rung names) against {span_text(*rate_of(device_rung, 'fed_samples_per_s'))} images/s."
        + load_text([post, native, device_rung])
    )


def loader_pair_verdict(rows: Sequence[tuple[str, Sequence[float]]], *, device: str) -> str:
    """04: two loaders' rates on their own over interleaved repeats, the second against the first, with ranges."""
    (first, a), (second, b) = rows
    a_rate, b_rate = statistics.median(a), statistics.median(b)
    ratio = ratio_with_range(b_rate, (min(b), max(b)), a_rate, (min(a), max(a)), pick=(second, first))
    return (
        f"On {device}, '{second}' delivered {span_text(b_rate, (min(b), max(b)))} samples/s against "
        f"{span_text(a_rate, (min(a), max(a)))} for '{first}' (medians of {len(a)} interleaved repeats): {ratio}."
    )


def rows_against_first_verdict(rows: Sequence[dict[str, Any]], *, what: str, unit: str = "batches/s") -> str:
    """04's overlap tables: each row's median rate against the first row's, with the ratio's range over rounds
    (worst against best), "within the noise" when the two rows' ranges overlap, and which row is fastest."""
    base = rows[0]
    parts = []
    for row in rows[1:]:
        low, high = row["range"][0] / base["range"][1], row["range"][1] / base["range"][0]
        ratio = row["batches_per_s"] / base["batches_per_s"]
        noise = ": within the noise of this machine" if ranges_overlap(row["range"], base["range"]) else ""
        parts.append(f"'{row['name']}' {ratio:.2f}x ({low:.2f}–{high:.2f}x){noise}")
    best = max(rows, key=lambda r: r["batches_per_s"])
    tied = [r["name"] for r in rows if r is not best and ranges_overlap(r["range"], best["range"])]
    pick = f"The fastest median is '{best['name']}', {best['batches_per_s']:.1f} {unit}"
    pick += (
        f", but its range overlaps {', '.join(repr(n) for n in tied)}: no clear winner, this measurement cannot "
        f"tell them apart on this machine over {best['rounds']} rounds."
        if tied
        else f", clear of every other row over {best['rounds']} rounds."
    )
    return f"{what}, against '{base['name']}' ({base['batches_per_s']:.1f} {unit}): " + "; ".join(parts) + ". " + pick
