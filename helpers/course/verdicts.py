"""Verdicts: the sentences a lesson states about its outcome, produced from that run's numbers, so that what a notebook
says is true on every machine it runs on. Markdown cells explain mechanisms; outcomes come from here."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def ratio_text(ratio: float) -> str:
    """A ratio as a reader says it: '3.2x more' or '0.6x (less)'."""
    return f"{ratio:.1f}x" if ratio >= 1 else f"{ratio:.2f}x (less)"


def memory_verdict(rows: Sequence[dict[str, Any]], *, claimed_input_ratio: float) -> str:
    """01: how much the traditional float32 store holds against the uint8 cache, at each scale, and the model inputs
    against the seed's claimed ratio."""
    parts = [
        f"x{r['scale']}: {r['traditional_mib']:.0f} MiB against {r['cache_mib']:.0f} MiB ({ratio_text(r['total_ratio'])})"
        for r in rows
    ]
    largest = max(rows, key=lambda r: r["scale"])
    inputs = largest["input_ratio"]
    relation = "more than" if inputs > claimed_input_ratio * 1.05 else "less than" if inputs < claimed_input_ratio * 0.95 else "about"
    return (
        f"Traditional float32 store against the uint8 cache, same images: {'; '.join(parts)}. At x{largest['scale']} "
        f"the model inputs alone are {inputs:.0f}x the uint8 LR they encode: {relation} the {claimed_input_ratio:.0f}x "
        "claimed" + (", because the claim counts pixels and the store holds each as a 4-byte float." if relation == "more than" else ".")
    )


def decode_verdict(crop_ms: float, full_ms: float, held: tuple[int, int], size: tuple[int, int]) -> str:
    """02: whether cropping saved decoding time and memory, from a crop's time against a full decode's."""
    whole = "the whole decoded image" if held == size else f"{held[0]}x{held[1]} pixels"
    verdict = (
        "cropping saved no decoding time" if crop_ms >= 0.7 * full_ms else f"cropping took {crop_ms / full_ms:.0%} of a full decode"
    )
    return f"A 32-px crop took {crop_ms:.2f} ms against {full_ms:.2f} ms for a full decode ({verdict}); afterwards PIL held {whole}."


def _ranges_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when two (low, high) ranges over rounds overlap: their difference is within the noise seen."""
    return a[0] <= b[1] and b[0] <= a[1]


def _noise_note(a: tuple[float, float] | None, b: tuple[float, float] | None) -> str:
    """What to append to a ratio whose two (low, high) ranges overlap; nothing when they do not or one is unknown."""
    return " (ranges overlap: within the noise)" if a is not None and b is not None and _ranges_overlap(a, b) else ""


def efficiency_text(row: dict[str, Any]) -> str:
    """A rung's pipeline efficiency with its range, and whether it is as fast as pre-made batches within the noise
    (a median of at least 0.95 with a range that reaches 1: one lucky block alone does not make it so)."""
    low, high = row.get("efficiency_range") or (row["pipeline_efficiency"],) * 2
    text = f"{row['pipeline_efficiency']:.2f} ({low:.2f}–{high:.2f})"
    return text + (", as fast as pre-made batches within the noise" if high >= 1.0 and row["pipeline_efficiency"] >= 0.95 else "")


def ladder_verdict(rows: Sequence[dict[str, Any]], *, first: int = 0) -> str:
    """02, 04: the ladder read like for like: loader-only rates against one rung (ranges that overlap named as noise),
    end-to-end rates among rungs that feed the same model, and which rungs' models differ."""
    base = rows[first]
    same_model = [r for r in rows if not r["model_note"]]
    parts = []
    for r in rows:
        if r is base:
            continue
        parts.append(f"'{r['name']}' {ratio_text(r['samples_per_s'] / base['samples_per_s'])}"
                     + _noise_note(r.get("samples_per_s_range"), base.get("samples_per_s_range")))
    lines = [f"Loader alone, against '{base['name']}': " + "; ".join(parts) + "."]
    if len(same_model) >= 2:
        fast = max(same_model, key=lambda r: r["fed_samples_per_s"])
        runner_up = max((r for r in same_model if r is not fast), key=lambda r: r["fed_samples_per_s"])
        lines.append(
            "End to end, feeding the same model: "
            + ", ".join(f"'{r['name']}' {r['fed_samples_per_s']:.0f}" for r in same_model)
            + f" samples/s; the fastest, '{fast['name']}', {ratio_text(fast['fed_samples_per_s'] / runner_up['fed_samples_per_s'])} "
            f"the next, '{runner_up['name']}'. Pipeline efficiency (fed / pre-made): "
            + "; ".join(f"'{r['name']}' {efficiency_text(r)}" for r in same_model) + "."
        )
    for note in dict.fromkeys(r["model_note"] for r in rows if r["model_note"]):
        names = " and ".join(f"'{r['name']}'" for r in rows if r["model_note"] == note)
        lines.append(f"{names} feed{'s' if ' and ' not in names else ''} another model: {note}.")
    return " ".join(lines)


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when two sweep rows' ranges over repeats overlap (their difference is within the noise seen)."""
    return _ranges_overlap((min(a["runs"]), max(a["runs"])), (min(b["runs"]), max(b["runs"])))


def sweep_verdict(rows: Sequence[dict[str, Any]], *, cores: int) -> str:
    """02: where DataLoader throughput peaked against the number of cores, read against the spread over repeats."""
    best = max(rows, key=lambda r: r["samples_per_s"])
    zero = min(rows, key=lambda r: r["num_workers"])
    relation = (
        "more workers than cores" if best["num_workers"] > cores
        else "as many workers as cores" if best["num_workers"] == cores
        else "fewer workers than cores"
    )  # fmt: skip
    text = (
        f"The loader alone (no training step) was fastest here with {best['num_workers']} workers (prefetch "
        f"{best['prefetch_factor']}): "
        f"{best['samples_per_s']:.0f} samples/s, {ratio_text(best['samples_per_s'] / zero['samples_per_s'])} the "
        f"{zero['samples_per_s']:.0f} of {zero['num_workers']} workers; that is {relation} ({cores} cores)."
    )
    close = [r for r in rows if r is not best and _overlap(r, best)]
    if len(best["runs"]) > 1 and close:
        fewest = min(close, key=lambda r: r["num_workers"])
        text += (
            f" Its range over {len(best['runs'])} repeats overlaps that of {len(close)} other setting(s), the fewest "
            f"workers among them {fewest['num_workers']}: those differences are within this machine's noise."
        )
    if best["num_workers"] >= cores:
        text += (f" While training, the step needs the same {cores} cores, so fewer workers may feed it better: the "
                 "ladder's end-to-end column measures that.")  # fmt: skip
    return text


def layout_verdict(*, rgb_ms: float, word_ms: float) -> str:
    """02: the cost of flipping and turning crops stored as 3-byte pixels against 32-bit RGBX words."""
    return (
        f"Flipping and turning 16 crops into one batch took {rgb_ms:.2f} ms as 3-byte pixels and {word_ms:.2f} ms as "
        f"32-bit words: the 3-byte layout took {ratio_text(rgb_ms / word_ms)} the time of the word layout, which "
        "uses 4/3 of the memory."
    )


def seed_claim_verdict(
    *, before: dict[str, Any], after: dict[str, Any], claimed_before: float, claimed_after: float
) -> str:
    """02: the post's before/after measured here: like for like first (the loaders alone), then each rung's efficiency
    and end to end, which mix loader and model when the two rungs feed different models; then the post's claim."""
    alone = after["samples_per_s"] / before["samples_per_s"]
    ratio = after["fed_samples_per_s"] / before["fed_samples_per_s"]
    mixed = " (the 'before' rung trains a model on HR-size inputs, so these two mix loader and model)" if (
        before["model_note"] != after["model_note"]
    ) else ""
    return (
        f"Loader alone, like for like: '{after['name']}' {after['samples_per_s']:.0f} samples/s against "
        f"{before['samples_per_s']:.0f} for '{before['name']}', {ratio_text(alone)}. Pipeline efficiency "
        f"{efficiency_text(after)} against {efficiency_text(before)}, and end to end {after['fed_samples_per_s']:.0f} "
        f"against {before['fed_samples_per_s']:.0f} samples/s, {ratio_text(ratio)}{mixed}. The post reported "
        f"{claimed_before:g} -> {claimed_after:g} images/s end to end on its GPU, {ratio_text(claimed_after / claimed_before)}."
    )


def disk_verdict(*, written: float, original: float, read: float, decoded: float, used: float) -> str:
    """01: what the traditional preprocessing wrote, and what each sample reads and decodes against what it keeps."""
    return (
        f"Preprocessing wrote {written / 2**20:.1f} MiB of upscaled PNGs for {original / 2**20:.1f} MiB of source "
        f"JPEGs ({ratio_text(written / original)}). Each sample reads {read / 2**10:.0f} KiB of files and builds "
        f"{decoded / 2**20:.1f} MiB of float tensors to keep {used / 2**20:.2f} MiB of crops "
        f"({decoded / used:.0f}x what it keeps)."
    )


def precision_verdict(results: Sequence[dict[str, Any]], *, device: str) -> str:
    """03: each precision's step time against fp32's, whether it is native here, and the losses at a common step."""
    fp32 = next(r for r in results if r["precision"] == "fp32")
    parts = []
    for r in results:
        if r is fp32:
            continue
        how = "native here" if r["native"] else "not native here (emulated or reference kernels)"
        parts.append(f"{r['precision']} {ratio_text(r['step_ms'] / fp32['step_ms'])} the fp32 step time, {how}")
    common = min(len(r["losses"]) for r in results)
    losses = ", ".join(f"{r['precision']} {r['losses'][common - 1]:.4f}" for r in results)
    fastest = min(results, key=lambda r: r["step_ms"])
    return (
        f"On {device}: {'; '.join(parts)}. The fastest step was {fastest['precision']} ({fastest['step_ms']:.1f} ms). "
        f"After {common} steps on the same batches the losses were {losses}."
    )


def channels_last_verdict(table: dict[tuple[str, str], float]) -> str:
    """03: what channels_last did to the step time, per precision."""
    parts = []
    for precision in dict.fromkeys(p for _, p in table):
        ratio = table[("NCHW", precision)] / table[("channels_last", precision)]
        parts.append(f"{precision}: NCHW step {ratio_text(ratio)} the channels_last step")
    return "channels_last here: " + "; ".join(parts) + " (above 1: channels_last was faster)."


def augmentation_claim_verdict(
    *, post: dict[str, Any], native: dict[str, Any], device_rung: dict[str, Any], claimed_ratio: float, device: str
) -> str:
    """04: the CIFAR post's claimed augmentation speed-up against the loaders measured on their own (decode and
    augment), like for like at 32 px first, then the post's 224-px pipeline; says when no GPU was measured."""
    where = (f"on {device}" if not device.startswith("cpu") else
             "on the CPU: here the 'device' is the CPU itself, so this run measured no GPU")  # fmt: skip
    same = device_rung["samples_per_s"] / native["samples_per_s"]
    noise = _noise_note(device_rung.get("samples_per_s_range"), native.get("samples_per_s_range"))
    return (
        f"The post claimed {claimed_ratio:.0f}x less augmentation time from moving it to the GPU; its pipeline runs per "
        f"sample on the CPU. Loader alone (decode + augment), measured {where}. At the same 32 px: kornia on the whole "
        f"dataset {device_rung['samples_per_s']:.0f} images/s against per-sample PIL {native['samples_per_s']:.0f}, "
        f"{ratio_text(same)}{noise}; the PIL loader decodes a PNG file "
        "per sample as well, the on-device one holds decoded pixels, so this ratio is decoding and augmentation "
        "together. The post's own pipeline (224 px) "
        f"delivered {post['samples_per_s']:.0f} images/s: kornia at 32 px {ratio_text(device_rung['samples_per_s'] / post['samples_per_s'])} "
        f"that, a ratio that mixes moving the augmentation with shrinking the crop 49x in pixels. End to end, feeding "
        f"the same network: {post['fed_samples_per_s']:.0f} (224-px inputs, at the batch its rung names) against "
        f"{device_rung['fed_samples_per_s']:.0f} images/s."
    )


def loader_pair_verdict(rows: Sequence[tuple[str, float]], *, device: str) -> str:
    """04: two loaders' rates on their own, the second against the first."""
    (first, a), (second, b) = rows
    return f"On {device}, '{second}' delivered {ratio_text(b / a)} the samples/s of '{first}' ({b:.0f} against {a:.0f})."


def sr_verdict(gains: Sequence[float], *, data: str) -> str:
    """05: the per-image gain over the bicubic baseline: mean, spread, range, and on how many images it was positive."""
    spread = statistics.stdev(gains) if len(gains) > 1 else 0.0
    return (
        f"Gain over the MATLAB bicubic baseline on {len(gains)} test images ({data}): mean {statistics.mean(gains):+.2f} "
        f"dB, median {statistics.median(gains):+.2f}, standard deviation {spread:.2f}, from {min(gains):+.2f} to {max(gains):+.2f}; the model scored above "
        f"bicubic on {sum(g > 0 for g in gains)} of {len(gains)} images."
    )


def pipelines_claim_verdict(measured: dict[str, Any], *, claimed_before: float, claimed_after: float) -> str:
    """05: two pipelines feeding the same model, end to end (with ranges over interleaved blocks), then the post's own
    before/after, which was measured elsewhere (its hardware, its 'before')."""
    (before_name, before), (after_name, after) = measured.items()
    noise = _noise_note(before.samples_per_s_range, after.samples_per_s_range)
    return (
        f"End to end, feeding the same model: '{after_name}' {after.samples_per_s:.1f} images/s against "
        f"'{before_name}' {before.samples_per_s:.1f}, {ratio_text(after.samples_per_s / before.samples_per_s)}{noise}; "
        f"data-wait per step {after.data_wait_ms:.1f} ms against {before.data_wait_ms:.1f} ms, compute "
        f"{after.compute_ms:.1f} ms against {before.compute_ms:.1f} ms. Separately, the post reported "
        f"{claimed_before:g} -> {claimed_after:g} images/s ({ratio_text(claimed_after / claimed_before)}) between its own "
        "before and after, on its own GPU: not measured here."
    )


def same_steps_verdict(
    *, post_rates: Sequence[float], course_rates: Sequence[float], post_px: int, course_px: int, post_batch: int,
    course_batch: int, same_network: bool
) -> str:
    """06: the post's set-up against the course's over the same steps (medians over interleaved rounds, with ranges),
    what differs between them besides the loader, and the pixel ratio of their inputs."""
    post, course = statistics.median(post_rates), statistics.median(course_rates)
    noise = _noise_note((min(post_rates), max(post_rates)), (min(course_rates), max(course_rates)))
    differs = ["the loader", f"the input size ({post_px} px against {course_px}: {(post_px / course_px) ** 2:.0f}x the "
               "pixels per image)"]
    if not same_network:
        positions = (post_px / 4 / course_px) ** 2  # the ImageNet stem (stride-2 conv, stride-2 pool) divides by 4
        differs.append(f"the network (the post's ImageNet-stem resnet18, which downsamples by 4 before its first block, "
                       f"so its blocks see {positions:.1f}x the positions the CIFAR-stem one's see)")
    if post_batch != course_batch:
        differs.append(f"the batch ({post_batch} against {course_batch})")
    return (
        f"The course's set-up trained {course:.1f} images/s and the post's {post:.1f} (medians over {len(post_rates)} "
        f"interleaved rounds): {ratio_text(course / post)}{noise}. The two differ in {', '.join(differs[:-1])} and "
        f"{differs[-1]}, so the ratio is the set-ups', not the loader's alone."
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
    return text + f"; half of that was reached after {half['trained_seconds']:.0f} s."


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
    """08: the GAN step's compute against the generator's alone, and what a second loader cost."""
    (g_name, g), (shared_name, shared), (second_name, second) = rows.items()
    return (
        f"Compute per iteration: '{shared_name}' {shared.compute_ms:.1f} ms against {g.compute_ms:.1f} ms for "
        f"'{g_name}' ({ratio_text(shared.compute_ms / g.compute_ms)}). Data-wait: {shared.data_wait_ms:.2f} ms with "
        f"one shared loader, {second.data_wait_ms:.2f} ms when D draws from a second loader (whose draws are timed "
        f"as compute: {second.compute_ms:.1f} ms); {shared.samples_per_s / batch:.2f} against "
        f"{second.samples_per_s / batch:.2f} GAN iterations/s."
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
    ) + (" The stand-in was cut to BSDS300's sizes wherever its photographs are large enough, so on it this census "
         "cannot test the claim: the real BSDS300 can." if standin else "")
