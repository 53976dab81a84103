"""Verdicts: the sentences a lesson states about its outcome, produced from that run's numbers, so that what a notebook
says is true on every machine it runs on. Markdown cells explain mechanisms; outcomes come from here."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any


def ratio_text(ratio: float) -> str:
    """A ratio as a reader says it: '3.2x more' or '0.6x (less)'."""
    return f"{ratio:.1f}x" if round(ratio, 2) >= 1 else f"{ratio:.2f}x (less)"  # never "1.00x (less)"


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


def _times(values: float | Sequence[float]) -> tuple[float, tuple[float, float] | None]:
    """A median and its range from repeated timings (a single number has no range)."""
    if isinstance(values, (int, float)):
        return float(values), None
    return statistics.median(values), (min(values), max(values))


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
    (crop, crop_range), (full, full_range) = _times(crop_ms), _times(full_ms)
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
        f"A 32-px crop took {_span(crop, crop_range, 2)} ms against {_span(full, full_range, 2)} ms for a full "
        f"decode ({verdict}); afterwards PIL held {whole}." + busy_text(load)
    )


def _ranges_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when two (low, high) ranges over rounds overlap: their difference is within the noise seen."""
    return a[0] <= b[1] and b[0] <= a[1]


def _span(value: float, spread: tuple[float, float] | None, digits: int = 0) -> str:
    """'400 (380–420)': a median with its range over rounds or blocks."""
    if spread is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} ({spread[0]:.{digits}f}–{spread[1]:.{digits}f})"


def ratio_with_range(
    a: float,
    a_range: tuple[float, float],
    b: float,
    b_range: tuple[float, float],
    *,
    pick: tuple[str, str] | None = None,
    lower_is_better: bool = False,
    keep: tuple[str, str] | None = None,
) -> str:
    """a against b as a ratio with its range (lowest over highest to highest over lowest); when the two ranges overlap
    it says so: 'within the noise of this machine', and, given `pick` (a's name, b's name), that this measurement
    cannot tell the two apart here; given `keep` too (the name kept, and why), which one the course keeps and why.
    (`lower_is_better` is kept for callers: a tie names no winner, whichever way round is better.)"""
    low, high = a_range[0] / b_range[1], a_range[1] / b_range[0]
    if a_range[0] == a_range[1] and b_range[0] == b_range[1]:
        return f"{ratio_text(a / b)} (one measurement each: no range)"
    shown = ratio_text(a / b)
    if a / b >= 1 and not low <= round(a / b, 1) <= high:  # rounded to one place it would fall outside its own range
        shown = f"{a / b:.2f}x"
    text = f"{shown} (range {low:.2f}–{high:.2f}x)"
    if not _ranges_overlap(a_range, b_range):
        return text
    return f"within the noise of this machine: measured {text}{tie_text(pick, keep)}"


def tie_text(names: tuple[str, str] | None, keep: tuple[str, str] | None = None) -> str:
    """After a result within the noise: '; this measurement cannot tell 'a' and 'b' apart on this machine', and with
    `keep` (a name and why) ', so the course keeps 'a', why'."""
    if names is None:
        return ""
    text = f"; this measurement cannot tell '{names[0]}' and '{names[1]}' apart on this machine"
    return text + (f": the course keeps '{keep[0]}', {keep[1]}" if keep else "")


def _efficiency(row: Any) -> tuple[float, float, float]:
    """(median, low, high) of a ladder row's or a PipelineResult's pipeline efficiency."""
    get: Callable[[str], Any] = row.get if isinstance(row, dict) else lambda key: getattr(row, key, None)
    median = get("pipeline_efficiency")
    low, high = get("efficiency_range") or (median, median)
    return median, low, high


def efficiency_text(row: Any) -> str:
    """A rung's pipeline efficiency with its range, never above 1 as a number: a median above 1 reads '1.0 within the
    noise (measured 1.38, ...)'; a range whose top passes 1 says that part is noise; and it is as fast as pre-made
    batches within the noise only with a median of at least 0.95 (one lucky block alone does not make it so)."""
    median, low, high = _efficiency(row)
    if median > 1:
        return f"1.0 within the noise (measured {median:.2f}, range {low:.2f}–{high:.2f})"
    text = f"{median:.2f} ({low:.2f}–{high:.2f}{'; above 1 only by noise' if high > 1 else ''})"
    return text + (", as fast as pre-made batches within the noise" if high >= 1.0 and median >= 0.95 else "")


def efficiency_cell(row: Any) -> str:
    """A table cell for a pipeline efficiency: the same rule as efficiency_text, short."""
    median, low, high = _efficiency(row)
    if median > 1:
        return f"1.0 within noise (measured {median:.2f}; {low:.2f}–{high:.2f})"
    return f"{median:.2f} ({low:.2f}–{high:.2f}{', >1 is noise' if high > 1 else ''})"


def cores_used(others: Sequence[float]) -> str:
    """Other processes' cores over several readings as printed: '1.1–1.7', or '1.0' when both ends print alike."""
    low, high = f"{min(others):.1f}", f"{max(others):.1f}"
    return low if low == high else f"{low}–{high}"


def busy_summary(rows: Sequence[dict[str, Any]]) -> str:
    """'other processes used 1.1–1.7 of 2 cores during the measurements of every rung' for the rows measured while
    the machine was busy (their `load_note`), or an empty string when none was."""
    busy = [r for r in rows if r.get("load_note")]
    if not busy:
        return ""
    if not all(r.get("load") for r in busy):
        return "; ".join(f"'{r['name']}': {r['load_note']}" for r in busy)
    others = [r["load"]["other_cores"] for r in busy]
    used = cores_used(others)
    which = "every rung" if len(busy) == len(rows) else ", ".join(f"'{r['name']}'" for r in busy)
    return f"other processes used {used} of {busy[0]['load']['cores']} cores during the measurements of {which}"


def load_text(rows: Sequence[dict[str, Any]]) -> str:
    """A sentence for the rungs measured while other processes kept the machine busy (empty when none was)."""
    summary = busy_summary(rows)
    return f" Measured on a busy machine ({summary}): these numbers include that load." if summary else ""


def by_role(rows: Sequence[dict[str, Any]], role: str) -> dict[str, Any]:
    """The ladder row with this role (an error naming the roles there are when no rung has it)."""
    for row in rows:
        if row.get("role") == role:
            return row
    raise KeyError(f"no ladder rung has the role {role!r}; the rungs' roles are {[r.get('role') for r in rows]}")


def _rate(row: dict[str, Any], key: str) -> tuple[float, tuple[float, float]]:
    return row[key], row.get(f"{key}_range") or (row[key], row[key])


def _ceiling_noise(rows: Sequence[dict[str, Any]]) -> tuple[list[str], set[int]]:
    """Sentences for ceiling rungs that measured slower than the rung they bound (noise, not a ranking), and the ids
    of those ceilings, which the end-to-end ranking leaves out."""
    lines, left_out = [], set()
    for ceiling in (r for r in rows if r.get("bounds")):
        bounded = by_role(rows, ceiling["bounds"])
        slower = [
            f"{what} {ceiling[key]:.0f} against {bounded[key]:.0f} samples/s"
            for key, what in (("loader_samples_per_s", "loader alone"), ("fed_samples_per_s", "end to end"))
            if ceiling[key] < bounded[key]
        ]
        if slower:
            left_out.add(id(ceiling))
            lines.append(
                f"The ceiling '{ceiling['name']}' measured slower than '{bounded['name']}', which it bounds "
                f"({'; '.join(slower)}): that difference is this machine's noise, not a ranking."
            )
    return lines, left_out


def ladder_verdict(rows: Sequence[dict[str, Any]], *, first: str = "seed post") -> str:
    """02, 04: the ladder read like for like: loader-only rates against the rung with role `first` (with ranges;
    overlapping ones named as noise), end to end among rungs that feed the same model (fastest against the next, with
    ranges), ceilings that measured slower than what they bound named as noise, and which rungs' models differ."""
    base = by_role(rows, first)
    parts = []
    for r in rows:
        if r is not base:
            ratio = ratio_with_range(
                *_rate(r, "loader_samples_per_s"), *_rate(base, "loader_samples_per_s"), pick=(r["name"], base["name"])
            )
            parts.append(f"'{r['name']}' {ratio}")
    lines = [f"Loader alone, against '{base['name']}': " + "; ".join(parts) + "."]
    noise, left_out = _ceiling_noise(rows)
    same_model = [r for r in rows if not r["model_note"] and id(r) not in left_out]
    if len(same_model) >= 2:
        fast, runner_up = sorted(same_model, key=lambda r: r["fed_samples_per_s"], reverse=True)[:2]
        ratio = ratio_with_range(
            *_rate(fast, "fed_samples_per_s"),
            *_rate(runner_up, "fed_samples_per_s"),
            pick=(fast["name"], runner_up["name"]),
        )
        lines.append(
            "End to end, feeding the same model: "
            + ", ".join(f"'{r['name']}' {_span(*_rate(r, 'fed_samples_per_s'))}" for r in same_model)
            + f" samples/s; the fastest, '{fast['name']}', against the next, '{runner_up['name']}': {ratio}. "
            "Pipeline efficiency (fed / pre-made): "
            + "; ".join(f"'{r['name']}' {efficiency_text(r)}" for r in same_model)
            + "."
        )
    lines += noise
    for note in dict.fromkeys(r["model_note"] for r in rows if r["model_note"]):
        names = " and ".join(f"'{r['name']}'" for r in rows if r["model_note"] == note)
        lines.append(f"{names} feed{'s' if ' and ' not in names else ''} another model: {note}.")
    return " ".join(lines) + load_text(rows)


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when two sweep rows' ranges over repeats overlap (their difference is within the noise seen)."""
    return _ranges_overlap(_spread(a), _spread(b))


def _spread(row: dict[str, Any]) -> tuple[float, float]:
    return min(row["runs"]), max(row["runs"])


def _setting(row: dict[str, Any]) -> str:
    """A sweep setting as a reader says it: workers, intra-op threads, prefetch."""
    count = row.get("intra_op_threads")
    threads = f"{count} intra-op thread{'s' * (count != 1)}" if count else "torch's threads"
    workers = f"{row['num_workers']} worker{'s' * (row['num_workers'] != 1)}"
    return f"{workers}, {threads}" + (f", prefetch {row['prefetch_factor']}" if row["num_workers"] else "")


def _sweep_rate(row: dict[str, Any]) -> str:
    low, high = _spread(row)
    return f"{row['samples_per_s']:.0f} samples/s ({low:.0f}–{high:.0f})"


def _ms_span(values: list[float]) -> str:
    """'35.5 ms (35.0–36.0 over 4 runs)', or '52.0 ms (one run: no range)'."""
    if len(values) == 1:
        return f"{values[0]:.1f} ms (one run: no range)"
    return f"{statistics.median(values):.1f} ms ({min(values):.1f}–{max(values):.1f} over {len(values)} runs)"


def _oversubscription_text(rows: Sequence[dict[str, Any]], cores: int) -> str:
    """End to end: per intra-op thread count, the step's compute over every repeat of the settings whose workers
    overfill the cores, against those within them (the same thread count, so only the workers differ)."""
    parts = []
    for threads in sorted({r["intra_op_threads"] for r in rows if r.get("intra_op_threads")}):
        same = [r for r in rows if r.get("intra_op_threads") == threads and "compute_ms" in r]
        over = [c for r in same if r["num_workers"] + threads > cores for c in r.get("compute_runs", [r["compute_ms"]])]
        within = [
            c for r in same if r["num_workers"] + threads <= cores for c in r.get("compute_runs", [r["compute_ms"]])
        ]
        if not (over and within):
            continue
        if len(over) == 1 and len(within) == 1:
            relation = "one run each, so no range to tell them apart by"
        elif min(over) > max(within):
            relation = "slower"
        elif max(over) < min(within):
            relation = "faster"
        else:
            relation = "no different within the noise"
        parts.append(
            f"with {threads} thread{'s' * (threads != 1)}, {_ms_span(within)} per step within the cores against "
            f"{_ms_span(over)} past them: {relation}"
        )
    if not parts:
        return ""
    lead = f" The step's compute where workers + intra-op threads stay within the {cores} cores or exceed them: "
    return lead + "; ".join(parts) + "."


def _claim_text(rows: Sequence[dict[str, Any]], cores: int) -> str:
    """The post's 'num_workers = 2-4x the cores', against the best setting with fewer workers."""
    claimed = [r for r in rows if 2 * cores <= r["num_workers"] <= 4 * cores]
    fewer = [r for r in rows if r["num_workers"] < 2 * cores]
    if not claimed or not fewer:
        return (
            f" The post's 'num_workers = 2–4x the cores' is untested here: no setting had "
            f"{2 * cores}–{4 * cores} workers" + ("" if claimed else " (the profile's cap on workers)") + "."
        )
    c, f = max(claimed, key=lambda r: r["samples_per_s"]), max(fewer, key=lambda r: r["samples_per_s"])
    if _overlap(c, f):
        outcome = (
            f"within the noise here: its best, {_setting(c)}, {_sweep_rate(c)}, against {_setting(f)}, {_sweep_rate(f)}"
        )
    elif c["samples_per_s"] > f["samples_per_s"]:
        outcome = (
            f"supported here: {_setting(c)} gave {_sweep_rate(c)}, "
            f"{ratio_text(c['samples_per_s'] / f['samples_per_s'])} the best with fewer workers ({_setting(f)}, {_sweep_rate(f)})"
        )
    else:
        outcome = (
            f"not supported here: {_setting(f)} gave {_sweep_rate(f)}, "
            f"{ratio_text(f['samples_per_s'] / c['samples_per_s'])} the best of 2–4x the cores ({_setting(c)}, {_sweep_rate(c)})"
        )
    return f" The post's 'num_workers = 2–4x the cores' is {outcome}."


def sweep_verdict(rows: Sequence[dict[str, Any]], *, cores: int) -> str:
    """02: the best setting of workers x intra-op threads against no workers, the settings within its noise, what
    oversubscribing the cores did to the step, and the post's '2-4x the cores' tested."""
    best = max(rows, key=lambda r: r["samples_per_s"])
    zero = max((r for r in rows if r["num_workers"] == 0), key=lambda r: r["samples_per_s"], default=None)
    zero = zero or min(rows, key=lambda r: r["num_workers"])
    what = (
        "End to end (the loader feeding the training step)"
        if best.get("mode") == "end to end"
        else "The loader alone (no training step)"
    )
    budget = best["num_workers"] + (best.get("intra_op_threads") or cores)
    relation = (
        "more workers than cores"
        if best["num_workers"] > cores
        else "as many workers as cores"
        if best["num_workers"] == cores
        else "fewer workers than cores"
    )
    text = (
        f"{what}, the fastest setting here was {_setting(best)}: {_sweep_rate(best)}, "
        f"{ratio_text(best['samples_per_s'] / zero['samples_per_s'])} the {zero['samples_per_s']:.0f} of "
        f"{_setting(zero)}; that is {relation}, and {budget} workers + threads on {cores} cores."
    )
    close = [r for r in rows if r is not best and _overlap(r, best)]
    if len(best["runs"]) > 1 and close:
        fewest = min(close, key=lambda r: r["num_workers"])
        text += (
            f" Its range over {len(best['runs'])} repeats overlaps that of {len(close)} other setting(s), the fewest "
            f"workers among them {fewest['num_workers']}: those differences are within this machine's noise."
        )
    return text + _oversubscription_text(rows, cores) + _claim_text(rows, cores)


def sweep_ladder_verdict(
    sweep: Sequence[dict[str, Any]],
    ladder: Sequence[dict[str, Any]],
    *,
    pairs: Sequence[tuple[str, dict[str, Any]]],
    ladder_threads: int,
) -> str:
    """02: each ladder rung's end-to-end rate against the sweep's row with the same setting (`pairs`: rung name and
    the sweep keys it matches), agreeing when their ranges overlap; where they do not, what differs between the two
    (a rung's own `threads`, where its row has them, else `ladder_threads`)."""
    parts, differ = [], []
    for name, match in pairs:
        rung = next(r for r in ladder if r["name"] == name)
        row = next(r for r in sweep if all(r.get(k) == v for k, v in match.items()))
        fed = rung["fed_samples_per_s"]
        rung_range = rung.get("fed_samples_per_s_range") or (fed, fed)
        agree = _ranges_overlap(rung_range, _spread(row))
        parts.append(
            f"'{name}' {fed:.0f} samples/s in the ladder against {_sweep_rate(row)} in the sweep ({_setting(row)}): "
            + (
                "they agree within the noise"
                if agree
                else f"the sweep measured {ratio_text(row['samples_per_s'] / fed)} the ladder's rate"
            )
        )
        if not agree:
            differ.append((rung, row))
    text = "End to end, the ladder and the sweep on the same settings: " + "; ".join(parts) + "."
    if differ:
        rung, row = differ[0]
        threads, rung_threads = row.get("intra_op_threads") or ladder_threads, rung.get("threads") or ladder_threads
        text += (
            f" What differs between the two measurements: the ladder gave each rung {rung['rounds']} turn(s) of "
            f"{rung['steps_per_turn']} step(s) between the other rungs' turns, its workers kept alive across "
            "them; "
            f"the sweep starts a fresh loader for each of its {len(row['runs'])} turn(s)"
            + (
                f", and ran with {threads} intra-op thread(s) against the ladder's {rung_threads}"
                if threads != rung_threads
                else ""
            )
            + "; and the two ran at different times, under whatever load the machine had then."
        )
    return text


def doctor_change_verdict(before: Any, after: Any, *, change: str) -> str:
    """01: the doctor on one training loop before and after one change: fed rates with their ranges over blocks, the
    ratio with its range (within the noise when the ranges overlap), and what the doctor read each time (diagnoses
    from helpers.doctor.diagnose)."""
    (b, b_low, b_high), (a, a_low, a_high) = before.fed_samples_per_s, after.fed_samples_per_s
    ratio = ratio_with_range(a, (a_low, a_high), b, (b_low, b_high), pick=(f"with {change}", "before"))
    return (
        f"With {change}, the loop was fed {a:.1f} samples/s ({a_low:.1f}–{a_high:.1f}) against {b:.1f} "
        f"({b_low:.1f}–{b_high:.1f}) before (medians over block pairs): {ratio}. The doctor read "
        f"{before.verdict.lower()} before and {after.verdict.lower()} after."
    )


def layout_verdict(*, rgb_ms: float | Sequence[float], word_ms: float | Sequence[float], load: Any = None) -> str:
    """02: the cost of flipping and turning crops stored as 3-byte pixels against 32-bit RGBX words (given the
    repeated timings, with their ranges and overlapping ranges named as noise; the load meter's line when busy)."""
    (rgb, rgb_range), (word, word_range) = _times(rgb_ms), _times(word_ms)
    if rgb_range is not None and word_range is not None:
        ratio = ratio_with_range(
            rgb, rgb_range, word, word_range, pick=("3-byte pixels", "32-bit words"), lower_is_better=True
        )
    else:
        ratio = ratio_text(rgb / word)
    return (
        f"Flipping and turning 16 crops into one batch took {_span(rgb, rgb_range, 2)} ms as 3-byte pixels and "
        f"{_span(word, word_range, 2)} ms as 32-bit words: the 3-byte layout took {ratio} the time of the word "
        "layout, which uses 4/3 of the memory." + busy_text(load)
    )


def reopen_verdict(
    build_s: Sequence[float], reopen_s: Sequence[float], *, images: int, mib: float, load: Any = None
) -> str:
    """02: building the decoded cache (decoding every image) against reopening it, from interleaved repeats, each
    with its range, the ratio with its range; the load meter's line when the machine was busy."""
    (build, build_range), (reopen, reopen_range) = _times(build_s), _times(reopen_s)
    assert build_range is not None and reopen_range is not None  # sequences: _times gives their ranges
    ratio = ratio_with_range(build, build_range, reopen, reopen_range, pick=("building", "reopening"))
    return (
        f"Building the cache (decoding {images} images) took {_span(build, build_range, 2)} s and reopening it "
        f"{_span(reopen, reopen_range, 3)} s (medians of {len(build_s)} interleaved repeats): building took {ratio} "
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
        *_rate(new, "loader_samples_per_s"), *_rate(old, "loader_samples_per_s"), pick=(new["name"], old["name"])
    )
    fed = ratio_with_range(
        *_rate(new, "fed_samples_per_s"), *_rate(old, "fed_samples_per_s"), pick=(new["name"], old["name"])
    )
    mixed = (
        " (the 'before' rung trains a model on HR-size inputs, so these two mix loader and model)"
        if (old["model_note"] != new["model_note"])
        else ""
    )
    return (
        f"Loader alone, like for like: '{new['name']}' {_span(*_rate(new, 'loader_samples_per_s'))} samples/s against "
        f"{_span(*_rate(old, 'loader_samples_per_s'))} for '{old['name']}', {alone}. Pipeline efficiency "
        f"{efficiency_text(new)} against {efficiency_text(old)}, and end to end {_span(*_rate(new, 'fed_samples_per_s'))} "
        f"against {_span(*_rate(old, 'fed_samples_per_s'))} samples/s, {fed}{mixed}. The post reported "
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
    fmt = ratio_with_range(*_rate(on_jpeg, rate), *_rate(on_png, rate), pick=("JPEG", "PNG"))
    same = _ranges_overlap(_rate(on_jpeg, rate)[1], _rate(on_png, rate)[1])
    reading = (
        "the file format makes no measurable difference to it here"
        if same
        else "that factor is the decoder's (JPEG or PNG), not the loader's: compare a loader with a peer on the same files"
    )
    against = "; ".join(
        f"{ratio_with_range(*_rate(cached, rate), *_rate(row, rate))} against '{row['name']}'"
        for row in (on_jpeg, on_png)
    )
    return (
        f"File format, loader alone: '{on_jpeg['name']}' {_span(*_rate(on_jpeg, rate))} samples/s on the JPEG files, "
        f"{_span(*_rate(on_png, rate))} on PNG copies of the same images: JPEG {fmt}; {reading}. The decoded cache, "
        f"which decodes each file once whatever its format: {against}." + load_text([on_jpeg, on_png, cached])
    )


def disk_verdict(*, written: float, original: float, read: float, decoded: float, used: float) -> str:
    """01: what the traditional preprocessing wrote, and what each sample reads and decodes against what it keeps."""
    return (
        f"Preprocessing wrote {written / 2**20:.1f} MiB of upscaled PNGs for {original / 2**20:.1f} MiB of source "
        f"JPEGs ({ratio_text(written / original)}). Each sample reads {read / 2**10:.0f} KiB of files and builds "
        f"{decoded / 2**20:.1f} MiB of float tensors to keep {used / 2**20:.2f} MiB of crops "
        f"({decoded / used:.0f}x what it keeps)."
    )


def _ratio_range(a: tuple[float, float] | None, b: tuple[float, float] | None) -> str:
    """The interval of a/b from two (low, high) ranges, as text ("" when either is unknown)."""
    if a is None or b is None or min(b) <= 0:
        return ""
    return f" (range {a[0] / b[1]:.2f}–{a[1] / b[0]:.2f}x{'; within the noise' if _ranges_overlap(a, b) else ''})"


def precision_verdict(results: Sequence[dict[str, Any]], *, device: str, choice: Any = None, load: Any = None) -> str:
    """03: each precision's step time against fp32's (with the interval of the ratio when the rows carry ranges),
    whether it is native here, the losses at a common step, the choice made from the same measurement, and the load
    meter's line when other processes used the cores during it (`load`, a helpers.loadmeter reading)."""
    fp32 = next(r for r in results if r["precision"] == "fp32")
    parts = []
    for r in results:
        if r is fp32:
            continue
        how = "native here" if r["native"] else "not native here (emulated or reference kernels)"
        spread = _ratio_range(r.get("step_ms_range"), fp32.get("step_ms_range"))
        parts.append(f"{r['precision']} {ratio_text(r['step_ms'] / fp32['step_ms'])} the fp32 step time{spread}, {how}")
    common = min(len(r["losses"]) for r in results)
    losses = ", ".join(f"{r['precision']} {r['losses'][common - 1]:.4f}" for r in results)
    fastest = min(results, key=lambda r: r["step_ms"])
    tied = [
        r["precision"]
        for r in results
        if r is not fastest
        and r.get("step_ms_range")
        and fastest.get("step_ms_range")
        and _ranges_overlap(r["step_ms_range"], fastest["step_ms_range"])
    ]
    ranking = f"The fastest median step was {fastest['precision']} ({fastest['step_ms']:.1f} ms)" + (
        f", but its range overlaps {' and '.join(tied)}'s: this measurement cannot tell "
        f"{' and '.join([fastest['precision'], *tied])} apart on this machine"
        if tied
        else ""
    )
    return (
        f"On {device}: {'; '.join(parts)}. {ranking}. After {common} steps on the same batches the losses were "
        f"{losses}.{_choice_text(choice)}" + busy_text(load)
    )


def _choice_text(choice: Any) -> str:
    """The precision kept and why, from the same timings as the table: after a tie, plainly which one the course
    keeps (fp32, the default, unless another is measurably faster)."""
    if choice is None:
        return ""
    if not getattr(choice, "within_noise", False):
        return f" The choice, from these same timings of the native precisions: {choice.reason}."
    others = " or ".join(p for p in choice.step_ms if p != choice.precision)
    why = (
        f"the default (full precision), since {others} is not measurably faster here"
        if choice.precision == "fp32"
        else "the lower median of the precisions this measurement cannot tell apart, fp32 not among them"
    )
    return f" The course keeps {choice.precision}, {why}: the choice comes from these same timings."


def _median_and_range(value: Any) -> tuple[float, tuple[float, float] | None]:
    if isinstance(value, (int, float)):
        return float(value), None
    return statistics.median(value), (min(value), max(value))


def channels_last_verdict(table: dict[tuple[str, str], Any], *, load: Any = None) -> str:
    """03: what channels_last did to the step time, per precision: a median ratio, and with repeated interleaved
    timings (lists of ms) the interval of the ratio and whether it is within the noise; the load meter's line when
    other processes used the cores during the timings (`load`)."""
    parts = []
    for precision in dict.fromkeys(p for _, p in table):
        nchw, nchw_range = _median_and_range(table[("NCHW", precision)])
        last, last_range = _median_and_range(table[("channels_last", precision)])
        spread = _ratio_range(nchw_range, last_range)
        tie = (
            tie_text(
                ("NCHW", "channels_last"),
                (
                    "channels_last",
                    "the layout the course's CIFAR recipe trains in, since NCHW is not measurably faster here",
                ),
            )
            if nchw_range and last_range and _ranges_overlap(nchw_range, last_range)
            else ""
        )
        apart = not tie and nchw != last
        faster = (" (channels_last faster)" if nchw > last else " (NCHW faster)") if apart else ""
        parts.append(f"{precision}: NCHW step {ratio_text(nchw / last)} the channels_last step{spread}{faster}{tie}")
    return "channels_last here: " + "; ".join(parts) + "." + busy_text(load)


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
    kornia = _rate(device_rung, "loader_samples_per_s")
    same = ratio_with_range(*kornia, *_rate(native, "loader_samples_per_s"), pick=("kornia", "per-sample PIL"))
    against_post = ratio_with_range(*kornia, *_rate(post, "loader_samples_per_s"))
    return (
        f"The post claimed {claimed_ratio:.0f}x less augmentation time from moving it to the GPU; its pipeline runs per "
        f"sample on the CPU. Loader alone (decode + augment), measured {where}. At the same 32 px: kornia on the whole "
        f"dataset {_span(*kornia)} images/s against per-sample PIL {_span(*_rate(native, 'loader_samples_per_s'))}, "
        f"{same}; the PIL loader decodes a PNG file "
        "per sample as well, the on-device one holds decoded pixels, so this ratio is decoding and augmentation "
        f"together. The post's own pipeline (224 px) delivered {_span(*_rate(post, 'loader_samples_per_s'))} images/s: "
        f"kornia at 32 px {against_post} that, a ratio that mixes moving the augmentation with shrinking the crop 49x "
        f"in pixels. End to end, feeding the same network: {_span(*_rate(post, 'fed_samples_per_s'))} (224-px inputs, "
        f"at the batch its rung names) against {_span(*_rate(device_rung, 'fed_samples_per_s'))} images/s."
        + load_text([post, native, device_rung])
    )


def loader_pair_verdict(rows: Sequence[tuple[str, Sequence[float]]], *, device: str) -> str:
    """04: two loaders' rates on their own over interleaved repeats, the second against the first, with ranges."""
    (first, a), (second, b) = rows
    a_rate, b_rate = statistics.median(a), statistics.median(b)
    ratio = ratio_with_range(b_rate, (min(b), max(b)), a_rate, (min(a), max(a)), pick=(second, first))
    return (
        f"On {device}, '{second}' delivered {_span(b_rate, (min(b), max(b)))} samples/s against "
        f"{_span(a_rate, (min(a), max(a)))} for '{first}' (medians of {len(a)} interleaved repeats): {ratio}."
    )


def sr_verdict(gains: Sequence[float], *, data: str) -> str:
    """05: the per-image gain over the bicubic baseline: mean, spread, range, and on how many images it was positive."""
    spread = statistics.stdev(gains) if len(gains) > 1 else 0.0
    return (
        f"Gain over the MATLAB bicubic baseline on {len(gains)} test images ({data}): mean {statistics.mean(gains):+.2f} "
        f"dB, median {statistics.median(gains):+.2f}, standard deviation {spread:.2f}, from {min(gains):+.2f} to {max(gains):+.2f}; the model scored above "
        f"bicubic on {sum(g > 0 for g in gains)} of {len(gains)} images."
    )


def busy_text(load: Any) -> str:
    """' Measured on a busy machine: other processes used 0.8 of 2 cores during this measurement.' for a load
    reading (helpers.loadmeter) taken while other processes kept the cores busy; empty for a quiet one or None."""
    return f" Measured on a busy machine: {load.note()}." if load is not None and load.busy else ""


def _result_load(results: Sequence[Any]) -> str:
    """A sentence for PipelineResults measured while other processes kept the machine busy (empty when none was)."""
    busy = [r.load for r in results if getattr(r, "load", None) is not None and r.load.busy]
    return f" Measured on a busy machine: {busy[0].note()}." if busy else ""


def pipelines_claim_verdict(measured: dict[str, Any], *, claimed_before: float, claimed_after: float) -> str:
    """05: two pipelines feeding the same model, end to end (with ranges over interleaved blocks), then the post's own
    before/after, which was measured elsewhere (its hardware, its 'before')."""
    (before_name, before), (after_name, after) = measured.items()
    ratio = ratio_with_range(
        after.fed_samples_per_s,
        after.fed_samples_per_s_range,
        before.fed_samples_per_s,
        before.fed_samples_per_s_range,
        pick=(after_name, before_name),
    )
    return (
        f"End to end, feeding the same model: '{after_name}' {_span(after.fed_samples_per_s, after.fed_samples_per_s_range, 1)} "
        f"images/s against '{before_name}' {_span(before.fed_samples_per_s, before.fed_samples_per_s_range, 1)}, {ratio}; "
        f"data-wait per step {_span(after.data_wait_ms, after.data_wait_ms_range, 1)} ms against "
        f"{_span(before.data_wait_ms, before.data_wait_ms_range, 1)} ms, compute "
        f"{_span(after.compute_ms, after.compute_ms_range, 1)} ms against {_span(before.compute_ms, before.compute_ms_range, 1)} "
        f"ms. Separately, the post reported {claimed_before:g} -> {claimed_after:g} images/s "
        f"({ratio_text(claimed_after / claimed_before)}) between its own before and after, on its own GPU: not measured here."
        + _result_load([before, after])
    )


def same_steps_verdict(
    *,
    post_rates: Sequence[float],
    course_rates: Sequence[float],
    post_px: int,
    course_px: int,
    post_batch: int,
    course_batch: int,
    same_network: bool,
    load: Any = None,
) -> str:
    """06: the post's set-up against the course's over the same steps (medians over interleaved rounds, with ranges),
    what differs between them besides the loader, the pixel ratio of their inputs, and the load meter's line when
    other processes used the cores during the timings (`load`)."""
    post, course = statistics.median(post_rates), statistics.median(course_rates)
    post_range, course_range = (min(post_rates), max(post_rates)), (min(course_rates), max(course_rates))
    ratio = ratio_with_range(course, course_range, post, post_range, pick=("the course's", "the post's"))
    differs = [
        "the loader",
        f"the input size ({post_px} px against {course_px}: {(post_px / course_px) ** 2:.0f}x the pixels per image)",
    ]
    if not same_network:
        positions = (post_px / 4 / course_px) ** 2  # the ImageNet stem (stride-2 conv, stride-2 pool) divides by 4
        differs.append(
            f"the network (the post's ImageNet-stem resnet18, which downsamples by 4 before its first block, "
            f"so its blocks see {positions:.1f}x the positions the CIFAR-stem one's see)"
        )
    if post_batch != course_batch:
        differs.append(f"the batch ({post_batch} against {course_batch})")
    return (
        f"The course's set-up trained {_span(course, course_range, 1)} images/s and the post's {_span(post, post_range, 1)} "
        f"(medians over {len(post_rates)} interleaved rounds): {ratio}. The two differ in {', '.join(differs[:-1])} and "
        f"{differs[-1]}, so the ratio is the set-ups', not the loader's alone." + busy_text(load)
    )


def accuracy_verdict(history: Sequence[dict[str, Any]], *, classes: int, data: str) -> str:
    """06: the final top-1 against chance, and when the run first passed half of its final accuracy."""
    final = history[-1]
    text = (
        f"Top-1 {100 * final['top1']:.1f}% on the test split of {data} after {final['trained_seconds']:.0f} s of "
        f"training ({final['optimizer_steps']} steps), against {100 / classes:.0f}% chance"
    )
    if len(history) < 2:
        return text + "; the budget bought one evaluation, so the curve is a single point."
    half = next(h for h in history if h["top1"] >= final["top1"] / 2)
    return text + (
        f"; half of that top-1 ({50 * final['top1']:.1f}%) was reached by {half['trained_seconds']:.0f} s, the first "
        f"of the {len(history)} evaluations at or above it (it may have been reached earlier, between evaluations)."
    )


def rank_reads_verdict(reads: Sequence[dict[str, Any]]) -> str:
    """08: per rank and epoch, bytes read (JPEG files against cache crops) and pixels decoded (whole images against
    none), at one rank and at the most ranks; like for like: bytes read against bytes read."""
    one, most = reads[0], reads[-1]
    ratio = most["cache_mib"] / most["jpeg_mib"]
    relation = "more" if ratio > 1 else "fewer" if ratio < 1 else "as many"
    return (
        f"Bytes read per rank per epoch at {most['ranks']} ranks: {most['cache_mib']:.1f} MiB of crops from the uint8 "
        f"cache against {most['jpeg_mib']:.1f} MiB of JPEG files with lazy crops, {ratio:.2f}x: the cache reads "
        f"{relation} bytes (JPEG files are compressed whole images; the cache holds raw pixels and reads only the "
        "crops). What the cache saves is decoding: lazy crops decode "
        f"{most['lazy_mib']:.0f} MiB of pixels per rank per epoch ({one['lazy_mib']:.0f} MiB at 1 rank; "
        f"{most['ranks'] * most['lazy_mib']:.0f} MiB for the node either way), the cache decodes none during training."
    )


def gan_verdict(rows: dict[str, Any], *, batch: int) -> str:
    """08: the GAN step's compute against the generator's alone, and what a second loader cost, each with its range
    over interleaved blocks (overlapping ranges named as noise)."""
    (g_name, g), (shared_name, shared), (second_name, second) = rows.items()
    compute = ratio_with_range(shared.compute_ms, shared.compute_ms_range, g.compute_ms, g.compute_ms_range)
    waits = ratio_with_range(
        second.data_wait_ms,
        second.data_wait_ms_range,
        shared.data_wait_ms,
        shared.data_wait_ms_range,
        pick=(second_name, shared_name),
        lower_is_better=True,
    )
    rate = ratio_with_range(
        shared.fed_samples_per_s,
        shared.fed_samples_per_s_range,
        second.fed_samples_per_s,
        second.fed_samples_per_s_range,
        pick=(shared_name, second_name),
    )

    def per_batch(r: Any) -> str:
        return _span(r.fed_samples_per_s / batch, tuple(v / batch for v in r.fed_samples_per_s_range), 2)

    return (
        f"Compute per iteration: '{shared_name}' {_span(shared.compute_ms, shared.compute_ms_range, 1)} ms against "
        f"{_span(g.compute_ms, g.compute_ms_range, 1)} ms for '{g_name}', {compute}. Data-wait: "
        f"{_span(shared.data_wait_ms, shared.data_wait_ms_range, 2)} ms with one shared loader, "
        f"{_span(second.data_wait_ms, second.data_wait_ms_range, 2)} ms when D draws from a second loader (whose draws "
        f"are timed as compute: {_span(second.compute_ms, second.compute_ms_range, 1)} ms), {waits}; "
        f"{per_batch(shared)} against {per_batch(second)} GAN iterations/s, {rate}." + _result_load([g, shared, second])
    )


def census_verdict(
    census: Any, *, claimed: tuple[int, int], standard: set[tuple[int, int]], standin: bool = False
) -> str:
    """00: whether any image has the claimed size, and how many have the dataset's standard sizes (on a stand-in cut
    to those sizes, the census says only that it cannot test the claim)."""
    total = sum(census.values())
    at_claim = sum(n for (w, h, _, _), n in census.items() if (w, h) == claimed)
    standard_count = sum(n for (w, h, _, _), n in census.items() if (w, h) in standard)
    sizes = ", ".join(f"{w}x{h}" for w, h in sorted(standard))
    return (
        f"{at_claim} of {total} images are {claimed[0]}x{claimed[1]}; {standard_count} have the standard BSDS300 "
        f"sizes ({sizes}); {len({(w, h) for (w, h, _, _) in census})} different sizes in all."
    ) + (
        " The stand-in was cut to BSDS300's sizes wherever its photographs are large enough, so on it this census "
        "cannot test the claim: the real BSDS300 can."
        if standin
        else ""
    )


def rows_against_first_verdict(rows: Sequence[dict[str, Any]], *, what: str, unit: str = "batches/s") -> str:
    """04's overlap tables: each row's median rate against the first row's, with the ratio's range over rounds
    (worst against best), "within the noise" when the two rows' ranges overlap, and which row is fastest."""
    base = rows[0]
    parts = []
    for row in rows[1:]:
        low, high = row["range"][0] / base["range"][1], row["range"][1] / base["range"][0]
        ratio = row["batches_per_s"] / base["batches_per_s"]
        noise = ": within the noise of this machine" if _ranges_overlap(row["range"], base["range"]) else ""
        parts.append(f"'{row['name']}' {ratio:.2f}x ({low:.2f}–{high:.2f}x){noise}")
    best = max(rows, key=lambda r: r["batches_per_s"])
    tied = [r["name"] for r in rows if r is not best and _ranges_overlap(r["range"], best["range"])]
    pick = f"The fastest median is '{best['name']}', {best['batches_per_s']:.1f} {unit}"
    pick += (
        f", but its range overlaps {', '.join(repr(n) for n in tied)}: no clear winner, this measurement cannot "
        f"tell them apart on this machine over {best['rounds']} rounds."
        if tied
        else f", clear of every other row over {best['rounds']} rounds."
    )
    return f"{what}, against '{base['name']}' ({base['batches_per_s']:.1f} {unit}): " + "; ".join(parts) + ". " + pick


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


def reduction_text(reduced_share: float, pixel_share: float, crop: int) -> str:
    """07: how many RandomResizedCrop boxes decode at reduced size and the median share of pixels decoded; when none
    does, that the reduced-decoding rung then decodes at full size, so draft mode plays no part in its number."""
    text = (
        f"{100 * reduced_share:.0f}% of {crop}-px RandomResizedCrop boxes decode at reduced size; the median box "
        f"decodes {100 * pixel_share:.0f}% of the pixels a full decode does"
    )
    if reduced_share == 0:
        text += (
            f". These images are too small for any box to be reduced on the way to {crop} px, so the "
            "'reduced-size JPEG decoding' rung below decodes every file at full size: its speed owes nothing to "
            "draft mode here (photographs of a few megapixels are where it pays)"
        )
    return text + "."


LOADER = "loader_samples_per_s"  # a ladder row's loader-alone rate (its range: LOADER + "_range")


def folder_rung_verdicts(rows: list[dict[str, Any]]) -> list[str]:
    """07: one sentence per rung from its numbers: loader-alone rate against the post's rung (role "post") with the
    ratio's range ("within the noise" when the ranges overlap), fed rate, efficiency with its range, the doctor."""
    post = by_role(rows, "post")
    lines = []
    for row in rows:
        rate, spread = _rate(row, LOADER)
        against = (
            "the reference"
            if row is post
            else "against the post's: "
            + ratio_with_range(rate, spread, *_rate(post, LOADER), pick=("this one", "the post's"))
        )
        lines.append(
            f"{row['name']}: loader alone {_span(rate, spread)} samples/s ({against}); fed end to end "
            f"{_span(row['fed_samples_per_s'], row.get('fed_samples_per_s_range'))} samples/s, efficiency "
            f"{efficiency_text(row)}; doctor: {row['doctor']}"
        )
    return lines


def storage_verdict(rows: list[dict[str, Any]]) -> str:
    """07: the folder (reduced decoding), the pre-resized store and the shards side by side, loader alone, found in
    the ladder's rows by their roles."""
    by_key = {
        key: by_role(rows, role)
        for key, role in (("reduced-size folder", "reduced decoding"), ("store", "store"), ("shards", "shards"))
    }
    ranked = sorted(by_key.items(), key=lambda item: -item[1][LOADER])
    (best, top), (runner_up, second) = ranked[0], ranked[1]
    ratio = ratio_with_range(*_rate(top, LOADER), *_rate(second, LOADER), pick=(best, runner_up))
    head = (
        f"{best} against {runner_up}, {ratio}"
        if "within the noise" in ratio
        else f"{best} is fastest here, {ratio} {runner_up}"
    )
    rates = ", ".join(f"{key} {_span(*_rate(row, LOADER))} samples/s" for key, row in by_key.items())
    return f"On this machine's local disk, loader alone: {head} ({rates})."
