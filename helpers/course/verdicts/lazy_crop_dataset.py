"""02's verdicts: cropping before decoding, the pixel layout, reopening the cache, the time spent waiting for data, the
post's before/after and the file format's part in a loader's speed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...spread import ratio_text
from ..ladder_row import LadderRow
from .ladder import by_role, load_text
from .text import busy_text, compare, efficiency_verdict, timings


def decode_verdict(
    crop_ms: float | Sequence[float],
    full_ms: float | Sequence[float],
    held: tuple[int, int],
    size: tuple[int, int],
    *,
    load: Any = None,
) -> str:
    """02: whether cropping saved decoding time and memory, from a crop's time against a full decode's (given the
    repeated timings, each with its range, and overlapping ranges named as noise; the load meter's line when the
    machine was busy)."""
    whole = "the whole decoded image" if held == size else f"{held[0]}x{held[1]} pixels"
    crop, full = timings(crop_ms), timings(full_ms)
    saved_nothing = crop.median >= 0.7 * full.median
    if crop.n != 1 and full.n != 1:
        ratio = compare(crop, full, pick=("the crop", "the full decode"))
        verdict = f"the crop against the full decode: {ratio}" + (
            "; cropping saved no decoding time" if saved_nothing else ""
        )
    else:
        verdict = (
            "cropping saved no decoding time"
            if saved_nothing
            else f"cropping took {crop.median / full.median:.0%} of a full decode"
        )
    return (
        f"A 32-px crop took {crop.text(2)} ms against {full.text(2)} ms for a full "
        f"decode ({verdict}); afterwards PIL held {whole}." + busy_text(load)
    )


def layout_verdict(*, rgb_ms: float | Sequence[float], word_ms: float | Sequence[float], load: Any = None) -> str:
    """02: the cost of flipping and turning crops stored as 3-byte pixels against 32-bit RGBX words (given the
    repeated timings, with their ranges and overlapping ranges named as noise; the load meter's line when busy)."""
    rgb, word = timings(rgb_ms), timings(word_ms)
    if rgb.n != 1 and word.n != 1:
        ratio = compare(rgb, word, pick=("3-byte pixels", "32-bit words"))
    else:
        ratio = ratio_text(rgb.median / word.median)
    return (
        f"Flipping and turning 16 crops into one batch took {rgb.text(2)} ms as 3-byte pixels and "
        f"{word.text(2)} ms as 32-bit words: the 3-byte layout took {ratio} the time of the word "
        "layout, which uses 4/3 of the memory." + busy_text(load)
    )


def reopen_verdict(
    build_s: Sequence[float], reopen_s: Sequence[float], *, images: int, mib: float, load: Any = None
) -> str:
    """02: building the decoded cache (decoding every image) against reopening it, from interleaved repeats, each
    with its range, the ratio with its range; the load meter's line when the machine was busy."""
    build, reopen = timings(build_s), timings(reopen_s)
    ratio = compare(build, reopen, pick=("building", "reopening"))
    return (
        f"Building the cache (decoding {images} images) took {build.text(2)} s and reopening it "
        f"{reopen.text(3)} s (medians of {len(build_s)} interleaved repeats): building took {ratio} "
        f"the reopen; {mib:.1f} MiB on disk." + busy_text(load)
    )


def seed_claim_verdict(
    rows: Sequence[LadderRow],
    *,
    claimed_before: float,
    claimed_after: float,
    before: str = "seed post",
    after: str = "lazy crop",
) -> str:
    """02: the post's before/after measured here (the rungs with roles `before` and `after`): like for like first (the
    loaders alone), then each rung's efficiency and end to end, which mix loader and model when the two rungs feed
    different models; every ratio with its range; then the post's claim."""
    old, new = by_role(rows, before), by_role(rows, after)
    alone = compare(new.loader, old.loader, pick=(new.name, old.name))
    fed = compare(new.fed, old.fed, pick=(new.name, old.name))
    mixed = (
        " (the 'before' rung trains a model on HR-size inputs, so these two mix loader and model)"
        if (old.model_note != new.model_note)
        else ""
    )
    return (
        f"Loader alone, like for like: '{new.name}' {new.loader.text()} samples/s against "
        f"{old.loader.text()} for '{old.name}', {alone}. Pipeline efficiency "
        f"{efficiency_verdict(new.efficiency)} against {efficiency_verdict(old.efficiency)}, and end to end "
        f"{new.fed.text()} against {old.fed.text()} samples/s, {fed}{mixed}. The post reported "
        f"{claimed_before:g} -> {claimed_after:g} images/s end to end on its GPU, {ratio_text(claimed_after / claimed_before)} "
        "(its own single measurement: no range)." + load_text([old, new])
    )


def file_format_verdict(
    rows: Sequence[LadderRow],
    *,
    jpeg: str = "lazy crop, workers",
    png: str = "lazy crop on PNG",
    cache: str = "decoded cache",
) -> str:
    """02 and the bench: the same lazy-crop loader on the JPEG files and on lossless PNG copies of the same images,
    loader alone with ranges: the part of its speed that is the file format; then the decoded cache against each."""
    on_jpeg, on_png, cached = by_role(rows, jpeg), by_role(rows, png), by_role(rows, cache)
    fmt = compare(on_jpeg.loader, on_png.loader, pick=("JPEG", "PNG"))
    reading = (
        "the file format makes no measurable difference to it here"
        if on_jpeg.loader.overlaps(on_png.loader)
        else "that factor is the decoder's (JPEG or PNG), not the loader's: compare a loader with a peer on the same files"
    )
    against = "; ".join(f"{compare(cached.loader, row.loader)} against '{row.name}'" for row in (on_jpeg, on_png))
    return (
        f"File format, loader alone: '{on_jpeg.name}' {on_jpeg.loader.text()} samples/s on the JPEG files, "
        f"{on_png.loader.text()} on PNG copies of the same images: JPEG {fmt}; {reading}. The decoded cache, "
        f"which decodes each file once whatever its format: {against}." + load_text([on_jpeg, on_png, cached])
    )


def wait_verdict(summaries: dict[str, dict[str, float]], *, claimed_fraction: float, load: Any = None) -> str:
    """02: each pipeline's share of step time spent waiting for data (from its per-step timeline), against the BSD100
    post's claim that its training waited that share (and the load meter's line when the machine was busy)."""
    parts = [
        f"'{name}' waited {s['wait_fraction']:.0%} of the time (median wait {1e3 * s['median_wait_s']:.1f} ms, "
        f"worst {1e3 * s['max_wait_s']:.1f} ms, against a median step of {1e3 * s['median_compute_s']:.1f} ms)"
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
