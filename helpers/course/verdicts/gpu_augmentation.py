"""04's verdicts: the CIFAR post's augmentation claim against the ladder, two loaders' rates, and the overlap tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...spread import Spread
from ..ladder_row import LadderRow
from .ladder import by_role, load_text
from .text import compare


def augmentation_claim_verdict(rows: Sequence[LadderRow], *, claimed_ratio: float, device: str) -> str:
    """04: the CIFAR post's claimed augmentation speed-up against the loaders measured on their own (decode and
    augment), like for like at 32 px first ("native size" against "device"), then the post's 224-px pipeline ("seed
    post"), every ratio with its range; says when no GPU was measured."""
    post, native, device_rung = by_role(rows, "seed post"), by_role(rows, "native size"), by_role(rows, "device")
    where = (
        f"on {device}"
        if not device.startswith("cpu")
        else "on the CPU: here the 'device' is the CPU itself, so this run measured no GPU"
    )
    kornia = device_rung.loader
    same = compare(kornia, native.loader, pick=("kornia", "per-sample PIL"))
    against_post = compare(kornia, post.loader)
    return (
        f"The post claimed {claimed_ratio:.0f}x less augmentation time from moving it to the GPU; its pipeline runs per "
        f"sample on the CPU. Loader alone (decode + augment), measured {where}. At the same 32 px: kornia on the whole "
        f"dataset {kornia.text()} images/s against per-sample PIL {native.loader.text()}, "
        f"{same}; the PIL loader decodes a PNG file "
        "per sample as well, the on-device one holds decoded pixels, so this ratio is decoding and augmentation "
        f"together. The post's own pipeline (224 px) delivered {post.loader.text()} images/s: "
        f"kornia at 32 px {against_post} that, a ratio that mixes moving the augmentation with shrinking the crop 49x "
        f"in pixels. End to end, feeding the same network: {post.fed.text()} (224-px inputs, "
        f"at the batch its rung names) against {device_rung.fed.text()} images/s."
        + load_text([post, native, device_rung])
    )


def loader_pair_verdict(rows: Sequence[tuple[str, Sequence[float]]], *, device: str) -> str:
    """04: two loaders' rates on their own over interleaved repeats, the second against the first, with ranges."""
    (first, a), (second, b) = rows
    a_rate, b_rate = Spread.of(a), Spread.of(b)
    ratio = compare(b_rate, a_rate, pick=(second, first))
    return (
        f"On {device}, '{second}' delivered {b_rate.text()} samples/s against "
        f"{a_rate.text()} for '{first}' (medians of {len(a)} interleaved repeats): {ratio}."
    )


def rows_against_first_verdict(rows: Sequence[dict[str, Any]], *, what: str, unit: str = "batches/s") -> str:
    """04's overlap tables: each row's median rate against the first row's, with the ratio's range over rounds
    (worst against best), "within the noise" when the two rows' ranges overlap, and which row is fastest."""
    rates = [Spread.around(row["batches_per_s"], row["range"], row.get("rounds")) for row in rows]
    parts = []
    for row, rate in zip(rows[1:], rates[1:]):
        ratio = rate.ratio(rates[0])
        noise = ": within the noise of this machine" if rate.overlaps(rates[0]) else ""
        parts.append(f"'{row['name']}' {ratio.median:.2f}x ({ratio.low:.2f}–{ratio.high:.2f}x){noise}")
    base, (best, fastest) = rows[0], max(zip(rows, rates), key=lambda pair: pair[0]["batches_per_s"])
    tied = [r["name"] for r, rate in zip(rows, rates) if r is not best and rate.overlaps(fastest)]
    pick = f"The fastest median is '{best['name']}', {best['batches_per_s']:.1f} {unit}"
    pick += (
        f", but its range overlaps {', '.join(repr(n) for n in tied)}: no clear winner, this measurement cannot "
        f"tell them apart on this machine over {best['rounds']} rounds."
        if tied
        else f", clear of every other row over {best['rounds']} rounds."
    )
    return f"{what}, against '{base['name']}' ({base['batches_per_s']:.1f} {unit}): " + "; ".join(parts) + ". " + pick
