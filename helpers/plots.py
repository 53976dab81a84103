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
