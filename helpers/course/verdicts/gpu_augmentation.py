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
    where = f"on {device}" if not device.startswith("cpu") else "on the CPU, so this run measured no GPU"
    same = compare(device_rung.loader, native.loader, pick=("device", "native size"))
    against_post = compare(device_rung.loader, post.loader)
    return (
        f"The post claimed {claimed_ratio:.0f}x less augmentation time on the GPU. Loader alone (decode + augment), "
        f"{where}: at the same 32 px, 'device' against 'native size': {same}, decoding and augmentation together. "
        f"Against the post's 224-px 'seed post': {against_post}, which also shrinks the crop 49x in pixels."
        + load_text([post, native, device_rung])
    )


def loader_pair_verdict(rows: Sequence[tuple[str, Sequence[float]]], *, device: str) -> str:
    """04: two loaders' rates on their own over interleaved repeats, the second against the first, with ranges."""
    (first, a), (second, b) = rows
    a_rate, b_rate = Spread.paired(a), Spread.paired(b)  # interleaved repeats: compared repeat by repeat
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
        noise = ": within the noise of this machine" if rate.ties(rates[0]) else ""
        parts.append(f"'{row['name']}' {ratio.median:.2f}x ({ratio.low:.2f}–{ratio.high:.2f}x){noise}")
    base, (best, fastest) = rows[0], max(zip(rows, rates), key=lambda pair: pair[0]["batches_per_s"])
    tied = [r["name"] for r, rate in zip(rows, rates) if r is not best and rate.ties(fastest)]
    pick = f"The fastest median is '{best['name']}', {best['batches_per_s']:.1f} {unit}"
    pick += (
        f", but its range overlaps {', '.join(repr(n) for n in tied)}: no clear winner, this measurement cannot "
        f"tell them apart on this machine over {best['rounds']} rounds."
        if tied
        else f", clear of every other row over {best['rounds']} rounds."
    )
    return f"{what}, against '{base['name']}' ({base['batches_per_s']:.1f} {unit}): " + "; ".join(parts) + ". " + pick
