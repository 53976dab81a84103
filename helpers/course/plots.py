"""Plots the notebooks show: image grids (and, as the course grows, throughput and training curves)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from PIL import Image


def _as_hwc(image: np.ndarray | Image.Image | torch.Tensor) -> np.ndarray:
    if isinstance(image, Image.Image):
        return np.asarray(image)
    if isinstance(image, torch.Tensor):
        array = image.detach().cpu()
        array = array.permute(1, 2, 0) if array.ndim == 3 and array.shape[0] in (1, 3) else array
        array = array.numpy()
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
) -> plt.Figure:
    """Draw images (HWC arrays, PIL images, or CHW tensors) in a grid with optional titles; return the figure."""
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
                axis.set_title(titles[index], fontsize=8)
    figure.tight_layout()
    return figure


def plot_ladder(rows: Sequence[dict], title: str = "") -> plt.Figure:
    """Bar charts of a loader ladder: loader samples/s (log scale) and pipeline efficiency per rung."""
    names = [r["name"] for r in rows]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 0.55 * len(rows) + 1.5), sharey=True)
    positions = np.arange(len(rows))[::-1]
    left.barh(positions, [r["samples_per_s"] for r in rows], color="tab:blue")
    left.set_xscale("log")
    left.set_xlabel("loader alone: samples/s (log scale)")
    left.set_yticks(positions, names, fontsize=8)
    right.barh(positions, [r["pipeline_efficiency"] for r in rows], color="tab:green")
    right.axvline(1.0, color="gray", linestyle="--", linewidth=1)
    right.set_xlabel("pipeline efficiency (fed / pre-made batches)")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    return figure


def plot_sweep(rows: Sequence[dict], title: str = "") -> plt.Figure:
    """Samples/s per DataLoader setting from a sweep, one bar per setting."""
    labels = [
        f"w={r['num_workers']} pin={'y' if r['pin_memory'] else 'n'}"
        + (f" pf={r['prefetch_factor']} pers={'y' if r['persistent_workers'] else 'n'}" if r["num_workers"] else "")
        for r in rows
    ]
    figure, axis = plt.subplots(figsize=(8, 0.4 * len(rows) + 1.2))
    positions = np.arange(len(rows))[::-1]
    axis.barh(positions, [r["samples_per_s"] for r in rows], color="tab:orange")
    axis.set_yticks(positions, labels, fontsize=8)
    axis.set_xlabel("samples/s")
    axis.set_title(title, fontsize=10)
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
    axis.set_title(title, fontsize=10)
    axis.legend(fontsize=8)
    figure.tight_layout()
    return figure
