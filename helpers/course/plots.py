"""Plots the notebooks show: image grids (and, as the course grows, throughput and training curves)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from PIL import Image

from ..spread import efficiency_text
from .ladder_row import LadderRow
from .verdicts.ladder import label


def _as_hwc(image: np.ndarray | Image.Image | torch.Tensor) -> np.ndarray:
    if isinstance(image, Image.Image):
        return np.asarray(image)
    if isinstance(image, torch.Tensor):
        tensor = image.detach().cpu()
        tensor = tensor.permute(1, 2, 0) if tensor.ndim == 3 and tensor.shape[0] in (1, 3) else tensor
        array = tensor.numpy()
    else:
        array = np.asarray(image)
    if array.dtype != np.uint8:
        array = np.clip(array, 0.0, 1.0)  # float images in [0, 1]
    return array.squeeze()


def show_image_grid(
    images: Sequence[np.ndarray | Image.Image | torch.Tensor],
    titles: Sequence[str] | None = None,
    columns: int = 4,
    cell_inches: float = 2.6,
    title: str = "",
) -> plt.Figure:
    """Draw images (HWC arrays, PIL images, or CHW tensors) in a grid with optional titles, under `title` (laid out
    with the rest, so it never overlaps the images' titles); return the figure."""
    if not images:
        raise ValueError("show_image_grid needs at least one image")
    columns = min(columns, len(images))
    rows = -(-len(images) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(columns * cell_inches, rows * cell_inches), squeeze=False)
    for index, axis in enumerate(axes.flat):
        axis.axis("off")
        if index < len(images):
            axis.imshow(_as_hwc(images[index]), cmap="gray", interpolation="nearest")
            if titles is not None:
                axis.set_title(titles[index], fontsize="small")
    if title:
        figure.suptitle(textwrap.fill(title, int(12 * columns * cell_inches)))
    figure.tight_layout()
    return figure


def plot_ladder(rows: Sequence[LadderRow], title: str = "") -> plt.Figure:
    """A ladder in two panels: the loader alone (samples/s, log scale, range over rounds) and end to end, feeding the
    model (fed samples/s as bars, the pre-made ceiling as a black tick, the efficiency written beside); rungs whose
    model differs are hatched and marked with a dagger."""
    names = [r.name + (" †" if r.model_note else "") for r in rows]
    positions = np.arange(len(rows))[::-1]
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 0.6 * len(rows) + 1.8), sharey=True)
    low = [r.loader.median - r.loader.low for r in rows]
    high = [r.loader.high - r.loader.median for r in rows]
    left.barh(positions, [r.loader.median for r in rows], xerr=[low, high], color="tab:blue", capsize=3)
    left.set_xscale("log")
    left.set_xlabel("loader alone: samples/s (log scale)")
    left.set_yticks(positions, [textwrap.fill(n, 48) for n in names], fontsize="small")
    bars = right.barh(positions, [r.fed_samples_per_s for r in rows], color="tab:green")
    for bar, row in zip(bars, rows):
        if row.model_note:
            bar.set_hatch("//")
            bar.set_facecolor("tab:olive")
    right.scatter(
        [r.premade_samples_per_s for r in rows],
        positions,
        marker="|",
        s=400,
        color="black",
        label="same step on pre-made batches",
    )
    reach = max(max(r.fed_samples_per_s, r.premade_samples_per_s) for r in rows)
    for position, row in zip(positions, rows):
        right.annotate(  # right of both the bar and the tick, so neither crosses the words
            f"  efficiency {efficiency_text(row.efficiency, short=True)}",
            (max(row.fed_samples_per_s, row.premade_samples_per_s), position),
            va="center",
            fontsize="small",
        )
    right.set_xlim(0, 2.2 * reach)  # room for the words inside the panel
    right.set_xlabel("end to end, feeding the model: samples/s")
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.3 / len(rows)), fontsize="small", frameon=False)
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def plot_cpu_budget(rows: Sequence[dict], *, cores: int, title: str = "") -> plt.Figure:
    """The workers x intra-op threads sweep, end to end: samples/s fed (left) and the step's compute per step (right)
    against num_workers, one line per thread count, ranges over repeats as error bars; hollow markers where workers +
    threads exceed the cores, and the cores marked."""
    figure, (rate_axis, compute_axis) = plt.subplots(1, 2, figsize=(12, 4.2))
    for threads, pinned in sorted({(r.get("intra_op_threads") or cores, r["pin_memory"]) for r in rows}):
        group = sorted(
            (
                r
                for r in rows
                if (r.get("intra_op_threads") or cores, r["pin_memory"]) == (threads, pinned)
                and (r["prefetch_factor"] or 2) == 2
            ),  # the line: the default prefetch; other prefetch factors are drawn as marked points below
            key=lambda r: r["num_workers"],
        )
        x = [r["num_workers"] for r in group]
        label = f"{threads} intra-op threads" + (", pin_memory" if pinned else "")
        for axis, key, runs in ((rate_axis, "samples_per_s", "runs"), (compute_axis, "compute_ms", "compute_runs")):
            y = [r[key] for r in group]
            spread = [[r[key] - min(r[runs]) for r in group], [max(r[runs]) - r[key] for r in group]]
            line = axis.errorbar(x, y, yerr=spread, marker="o", capsize=3, label=label)
            over = [(r["num_workers"], r[key]) for r in group if r["num_workers"] + threads > cores]
            if over:
                axis.scatter(*zip(*over), s=90, facecolors="white", edgecolors=line[0].get_color(), zorder=3)
            for r in rows:  # a setting off the line (another prefetch factor): a cross, its factor written beside
                if (r.get("intra_op_threads") or cores, r["pin_memory"]) == (threads, pinned) and (
                    r["prefetch_factor"] or 2
                ) != 2:
                    axis.scatter(r["num_workers"], r[key], marker="x", s=60, color=line[0].get_color(), zorder=4)
                    axis.annotate(f" prefetch {r['prefetch_factor']}", (r["num_workers"], r[key]), fontsize="x-small")
    labels = ((rate_axis, "samples/s fed (median, range over repeats)"), (compute_axis, "compute ms per step"))
    for axis, label in labels:
        axis.axvline(cores, color="gray", linestyle="--", label=f"{cores} CPU cores")
        axis.set_xlabel("num_workers")
        axis.set_ylabel(label)
        axis.legend(fontsize=8)
    compute_axis.set_title("hollow: workers + threads exceed the cores", fontsize=9)
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def plot_precisions(results: Sequence[dict], title: str = "", *, memory: bool = True) -> plt.Figure:
    """Per precision: median step time, the device memory each added (with `memory`: CUDA's allocator counts it
    exactly; a CPU process's resident size mixes in what earlier turns left allocated, so it is left out), and the
    loss curves (markers and line styles keep curves that lie on one another visible)."""
    figure, axes = plt.subplots(1, 3 if memory else 2, figsize=(14 if memory else 10, 3.8))
    time_axis, loss_axis = axes[0], axes[-1]
    names = [r["precision"] + ("" if r["native"] else " (not native)") for r in results]
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red"][: len(results)]
    bars = time_axis.bar(names, [r["step_ms"] for r in results], color=colours)
    time_axis.bar_label(bars, fmt="%.1f", fontsize="small")  # a linear axis, so the bars' lengths compare
    time_axis.set_ylabel("median step ms")
    time_axis.margins(y=0.15)
    if memory:
        axes[1].bar(names, [r["extra_mib"] for r in results], color=colours)
        axes[1].set_ylabel("extra device memory, MiB")
    for (r, colour), style in zip(zip(results, colours), ["-", "--", ":", "-."]):
        loss_axis.plot(
            r["losses"],
            linestyle=style,
            marker="o",
            markersize=3,
            markevery=max(1, len(r["losses"]) // 12),
            color=colour,
            label=f"{r['precision']} ({len(r['losses'])} steps)",
        )
    loss_axis.set_xlabel("step")
    loss_axis.set_ylabel("L1 loss")
    loss_axis.legend()
    for axis in axes[:-1]:
        axis.tick_params(axis="x", rotation=15)
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def plot_memory(rows: Sequence[dict], title: str = "") -> plt.Figure:
    """Grouped bars of bytes held per scale: the traditional float32 stores against the uint8 cache."""
    scales = [r["scale"] for r in rows]
    x = np.arange(len(rows))
    figure, axis = plt.subplots(figsize=(7, 3.5))
    axis.bar(x - 0.2, [r["traditional_mib"] for r in rows], 0.4, label="traditional: float32 upscaled LR + HR")
    axis.bar(x + 0.2, [r["cache_mib"] for r in rows], 0.4, label="decoded cache: uint8 LR + HR")
    axis.set_xticks(x, [f"x{s}" for s in scales])
    axis.set_ylabel("MiB held")
    axis.set_title(title)
    axis.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=2, frameon=False)
    figure.tight_layout()  # the legend below the axes: above the bars it covered the tallest
    return figure


def plot_timeline(timelines: dict[str, Sequence[dict]], title: str = "") -> plt.Figure:
    """Per-step timelines, one band per pipeline: the seconds each step waited for its batch (red) and computed
    (blue), laid along the wall clock, so a starved pipeline shows as gaps between its steps."""
    figure, axis = plt.subplots(figsize=(12, 0.9 * len(timelines) + 1.4))
    for band, (name, rows) in enumerate(reversed(list(timelines.items()))):
        waits = [(r["start_s"], r["wait_s"]) for r in rows]
        computes = [(r["start_s"] + r["wait_s"], r["compute_s"]) for r in rows]
        axis.broken_barh(waits, (band - 0.35, 0.7), color="tab:red", label="waiting for data" if band == 0 else None)
        axis.broken_barh(computes, (band - 0.35, 0.7), color="tab:blue", label="step" if band == 0 else None)
        # a wait of a millisecond is narrower than a pixel at this scale: a red tick on each wait keeps it in view
        axis.vlines([start for start, wait in waits if wait > 0], band + 0.35, band + 0.5, color="tab:red", lw=1)
    axis.set_yticks(range(len(timelines)), [textwrap.fill(n, 28) for n in reversed(list(timelines))])
    axis.set_xlabel("seconds since the first timed step")
    axis.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=2, fontsize="small", frameon=False)
    axis.set_title(title, fontsize="medium", loc="left", y=1.08)
    figure.tight_layout()
    return figure


def plot_min_model(rows: Sequence[LadderRow], title: str = "") -> plt.Figure:
    """The model to carry home, fed by a ladder's numbers: a loader feeding a step delivers about the slower of the
    two, min(loader alone, step on pre-made batches); each rung's two rates, that minimum and the fed rate measured."""
    names = [label(row) for row in rows]
    series = {
        "loader alone": [row.loader_samples_per_s for row in rows],
        "step on pre-made batches": [row.premade_samples_per_s for row in rows],
        "min of the two (predicted)": [min(row.loader_samples_per_s, row.premade_samples_per_s) for row in rows],
        "fed, measured": [row.fed_samples_per_s for row in rows],
    }
    figure, axes = plt.subplots(figsize=(9, 0.9 * len(rows) + 1.5))
    height, where = 0.8 / len(series), np.arange(len(rows))
    for k, (what, values) in enumerate(series.items()):
        axes.barh(where + k * height, values, height, label=what)
    axes.set_yticks(where + 0.4 - height / 2, names)
    axes.invert_yaxis()
    axes.set_xscale("log")
    axes.set_xlabel("samples/s (log scale)")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    axes.set_title(textwrap.fill(title, 70) if title else "throughput ≈ min(loader rate, step rate)")
    figure.tight_layout()
    return figure


def plot_trace(trace_path: str, names: Sequence[str] = ("fetch", "copy", "step")) -> plt.Figure:
    """The ranges a profiler trace (Chrome trace JSON, torch.profiler) recorded under `names`, one row each, on one
    time axis: the gaps between the step's bars are the time the loop spent doing something else."""
    with open(trace_path, encoding="utf-8") as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e.get("name") in names]
    if not events:
        raise ValueError(f"{trace_path}: no ranges named {list(names)} in the trace; was it written by profile_steps?")
    start = min(e["ts"] for e in events)
    figure, axes = plt.subplots(figsize=(10, 0.6 * len(names) + 1.4))
    for row, name in enumerate(names):
        spans = [((e["ts"] - start) / 1000, e["dur"] / 1000) for e in events if e["name"] == name]
        axes.broken_barh(spans, (row - 0.35, 0.7), color=f"C{row}")
    axes.set_yticks(range(len(names)), list(names))
    axes.invert_yaxis()
    axes.set_xlabel("ms since the first recorded range")
    figure.tight_layout()
    return figure
