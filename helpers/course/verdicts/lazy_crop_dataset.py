"""02's verdicts: cropping before decoding, the pixel layout, reopening the cache, the time spent waiting for data, the
post's before/after and the file format's part in a loader's speed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .ladder import by_role, load_text, rate_of
from .text import busy_text, efficiency_text, median_range, ranges_overlap, ratio_text, ratio_with_range, span_text


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
    (crop, crop_range), (full, full_range) = median_range(crop_ms), median_range(full_ms)
    if crop_range is not None and full_range is not None:
        ratio = ratio_with_range(
            crop, crop_range, full, full_range, pick=("the crop", "the full decode"), lower_is_better=True
        )
        verdict = f"the crop against the full decode: {ratio}" + (
            "; cropping saved no decoding time" if crop >= 0.7 * full else ""
        )
    else:
        verdict = (
            "cropping saved no decoding time"
            if crop >= 0.7 * full
            else f"cropping took {crop / full:.0%} of a full decode"
        )
    return (
        f"A 32-px crop took {span_text(crop, crop_range, 2)} ms against {span_text(full, full_range, 2)} ms for a full "
        f"decode ({verdict}); afterwards PIL held {whole}." + busy_text(load)
    )


def layout_verdict(*, rgb_ms: float | Sequence[float], word_ms: float | Sequence[float], load: Any = None) -> str:
    """02: the cost of flipping and turning crops stored as 3-byte pixels against 32-bit RGBX words (given the
    repeated timings, with their ranges and overlapping ranges named as noise; the load meter's line when busy)."""
    (rgb, rgb_range), (word, word_range) = median_range(rgb_ms), median_range(word_ms)
    if rgb_range is not None and word_range is not None:
        ratio = ratio_with_range(
            rgb, rgb_range, word, word_range, pick=("3-byte pixels", "32-bit words"), lower_is_better=True
        )
    else:
        ratio = ratio_text(rgb / word)
    return (
        f"Flipping and turning 16 crops into one batch took {span_text(rgb, rgb_range, 2)} ms as 3-byte pixels and "
        f"{span_text(word, word_range, 2)} ms as 32-bit words: the 3-byte layout took {ratio} the time of the word "
        "layout, which uses 4/3 of the memory." + busy_text(load)
    )


def reopen_verdict(
    build_s: Sequence[float], reopen_s: Sequence[float], *, images: int, mib: float, load: Any = None
) -> str:
    """02: building the decoded cache (decoding every image) against reopening it, from interleaved repeats, each
    with its range, the ratio with its range; the load meter's line when the machine was busy."""
    (build, build_range), (reopen, reopen_range) = median_range(build_s), median_range(reopen_s)
    assert build_range is not None and reopen_range is not None  # sequences: median_range gives their ranges
    ratio = ratio_with_range(build, build_range, reopen, reopen_range, pick=("building", "reopening"))
    return (
        f"Building the cache (decoding {images} images) took {span_text(build, build_range, 2)} s and reopening it "
        f"{span_text(reopen, reopen_range, 3)} s (medians of {len(build_s)} interleaved repeats): building took {ratio} "
        f"the reopen; {mib:.1f} MiB on disk." + busy_text(load)
    )


def seed_claim_verdict(
    rows: Sequence[dict[str, Any]],
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
    alone = ratio_with_range(
        *rate_of(new, "loader_samples_per_s"), *rate_of(old, "loader_samples_per_s"), pick=(new["name"], old["name"])
    )
    fed = ratio_with_range(
        *rate_of(new, "fed_samples_per_s"), *rate_of(old, "fed_samples_per_s"), pick=(new["name"], old["name"])
    )
    mixed = (
        " (the 'before' rung trains a model on HR-size inputs, so these two mix loader and model)"
        if (old["model_note"] != new["model_note"])
        else ""
    )
    return (
        f"Loader alone, like for like: '{new['name']}' {span_text(*rate_of(new, 'loader_samples_per_s'))} samples/s against "
        f"{span_text(*rate_of(old, 'loader_samples_per_s'))} for '{old['name']}', {alone}. Pipeline efficiency "
        f"{efficiency_text(new)} against {efficiency_text(old)}, and end to end {span_text(*rate_of(new, 'fed_samples_per_s'))} "
        f"against {span_text(*rate_of(old, 'fed_samples_per_s'))} samples/s, {fed}{mixed}. The post reported "
        f"{claimed_before:g} -> {claimed_after:g} images/s end to end on its GPU, {ratio_text(claimed_after / claimed_before)} "
        "(its own single measurement: no range)." + load_text([old, new])
    )


def file_format_verdict(
    rows: Sequence[dict[str, Any]],
    *,
    jpeg: str = "lazy crop, workers",
    png: str = "lazy crop on PNG",
    cache: str = "decoded cache",
) -> str:
    """02 and the bench: the same lazy-crop loader on the JPEG files and on lossless PNG copies of the same images,
    loader alone with ranges: the part of its speed that is the file format; then the decoded cache against each."""
    on_jpeg, on_png, cached = by_role(rows, jpeg), by_role(rows, png), by_role(rows, cache)
    rate = "loader_samples_per_s"
    fmt = ratio_with_range(*rate_of(on_jpeg, rate), *rate_of(on_png, rate), pick=("JPEG", "PNG"))
    same = ranges_overlap(rate_of(on_jpeg, rate)[1], rate_of(on_png, rate)[1])
    reading = (
        "the file format makes no measurable difference to it here"
        if same
        else "that factor is the decoder's (JPEG or PNG), not the loader's: compare a loader with a peer on the same files"
    )
    against = "; ".join(
        f"{ratio_with_range(*rate_of(cached, rate), *rate_of(row, rate))} against '{row['name']}'"
        for row in (on_jpeg, on_png)
    )
    return (
        f"File format, loader alone: '{on_jpeg['name']}' {span_text(*rate_of(on_jpeg, rate))} samples/s on the JPEG files, "
        f"{span_text(*rate_of(on_png, rate))} on PNG copies of the same images: JPEG {fmt}; {reading}. The decoded cache, "
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
