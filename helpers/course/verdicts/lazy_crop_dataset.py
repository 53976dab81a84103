"""02's verdicts: cropping before decoding, the pixel layout, reopening the cache, the time spent waiting for data, the
post's before/after and the file format's part in a loader's speed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...spread import ratio_text
from ..ladder_row import LadderRow
from .ladder import by_role, label, load_text
from .text import busy_text, compare, timings


def decode_verdict(
    crop_ms: float | Sequence[float],
    full_ms: float | Sequence[float],
    held: tuple[int, int],
    size: tuple[int, int],
    *,
    load: Any = None,
) -> str:
    """02: whether cropping saved decoding time and memory, beside the table of both timings: a crop against a full
    decode (round by round over interleaved repeats, within the noise named as such), and what PIL held after."""
    whole = "the whole decoded image" if held == size else f"{held[0]}x{held[1]} pixels"
    crop, full = timings(crop_ms), timings(full_ms)
    saved_nothing = crop.median >= 0.7 * full.median
    if crop.n != 1 and full.n != 1:
        verdict = f"A 32-px crop against a full decode: {compare(crop, full)}"
    else:
        verdict = f"A 32-px crop took {crop.median / full.median:.0%} of a full decode"
    saved = "cropping saved no decoding time, and " if saved_nothing else ""
    return f"{verdict}; {saved}PIL held {whole} afterwards." + busy_text(load)


def layout_verdict(*, rgb_ms: float | Sequence[float], word_ms: float | Sequence[float], load: Any = None) -> str:
    """02: the cost of flipping and turning crops stored as 3-byte pixels against 32-bit RGBX words (given the
    timings of interleaved rounds, compared round by round, within the noise named as such)."""
    rgb, word = timings(rgb_ms), timings(word_ms)
    ratio = compare(rgb, word) if rgb.n != 1 and word.n != 1 else ratio_text(rgb.median / word.median)
    return (
        f"Flipping and turning 16 crops into one batch took {rgb.text(3)} ms as 3-byte pixels and "
        f"{word.text(3)} ms as 32-bit words (4/3 of the memory); the 3-byte layout against the word layout: "
        f"{ratio}." + busy_text(load)
    )


def reopen_verdict(
    build_s: Sequence[float], reopen_s: Sequence[float], *, images: int, mib: float, load: Any = None
) -> str:
    """02: building the decoded cache (decoding every image) against reopening it, from interleaved repeats compared
    round by round."""
    build, reopen = timings(build_s), timings(reopen_s)
    ratio = compare(build, reopen, pick=("building", "reopening"))
    return (
        f"Building the cache (decoding {images} images) took {build.text(2)} s and reopening it "
        f"{reopen.text(3)} s over {len(build_s)} interleaved repeats; building against reopening: {ratio}; "
        f"{mib:.1f} MiB on disk." + busy_text(load)
    )


def seed_claim_verdict(
    rows: Sequence[LadderRow],
    *,
    claimed_before: float,
    claimed_after: float,
    before: str = "seed post",
    after: str = "lazy crop",
) -> str:
    """02: the post's before/after measured here (the rungs with roles `before` and `after`), in their short names:
    like for like first (the loaders alone), then end to end, which mixes loader and model when the two rungs feed
    different models; every ratio with its range; then the post's claim."""
    old, new = by_role(rows, before), by_role(rows, after)
    alone = compare(new.loader, old.loader, pick=(label(new), label(old)))
    fed = compare(new.fed, old.fed, pick=(label(new), label(old)))
    mixed = (
        f", though '{label(old)}' trains its model on HR-size inputs, so this mixes loader and model"
        if (old.model_note != new.model_note)
        else ""
    )
    return (
        f"Like for like, loader alone, '{label(new)}' against '{label(old)}': {alone}. End to end: {fed}{mixed}. "
        f"The post reported {claimed_before:g} -> {claimed_after:g} images/s end to end on its GPU, "
        f"{ratio_text(claimed_after / claimed_before)} (one measurement: no range)." + load_text([old, new])
    )


def file_format_verdict(
    rows: Sequence[LadderRow],
    *,
    jpeg: str = "lazy crop, workers",
    png: str = "lazy crop on PNG",
    cache: str = "decoded cache",
) -> str:
    """02 and the bench: the same lazy-crop loader on the JPEG files and on lossless PNG copies of the same images,
    loader alone, round by round: the part of its speed that is the file format; then the decoded cache against
    each."""
    on_jpeg, on_png, cached = by_role(rows, jpeg), by_role(rows, png), by_role(rows, cache)
    fmt = compare(on_jpeg.loader, on_png.loader, pick=("JPEG", "PNG"))
    reading = (
        "the file format makes no measurable difference to it here"
        if on_jpeg.loader.ties(on_png.loader)
        else "that factor is the decoder's, not the loader's"
    )
    against = " and ".join(f"against '{label(row)}' {compare(cached.loader, row.loader)}" for row in (on_jpeg, on_png))
    return (
        f"Loader alone, '{label(on_jpeg)}' on the JPEG files against PNG copies of the same images: {fmt}; "
        f"{reading}. '{label(cached)}', which decodes each file once: {against}." + load_text([on_jpeg, on_png, cached])
    )


def wait_verdict(summaries: dict[str, dict[str, float]], *, claimed_fraction: float, load: Any = None) -> str:
    """02: each pipeline's share of step time spent waiting for data (from its per-step timeline), against the BSD100
    post's claim that its training waited that share (and the load meter's line when the machine was busy)."""
    parts = [
        f"'{name}' waited {s['wait_fraction']:.0%} of the time (worst wait {1e3 * s['max_wait_s']:.0f} ms, median "
        f"step {1e3 * s['median_compute_s']:.0f} ms)"
        for name, s in summaries.items()
    ]
    worst_name, worst = max(summaries.items(), key=lambda item: item[1]["wait_fraction"])
    relation = (
        "more than"
        if worst["wait_fraction"] > claimed_fraction + 0.05
        else "less than"
        if worst["wait_fraction"] < claimed_fraction - 0.05
        else "about"
    )
    return (
        f"Over {worst['steps']:.0f} timed steps each: " + "; ".join(parts) + f". The most starved, '{worst_name}', "
        f"waited {relation} the {claimed_fraction:.0%} the BSD100 post reports for its own loader and GPU."
        + busy_text(load)
    )
