"""ReducedCropDataset flips about half of its samples, each drawn on its own."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from helpers.jpeg_crop import ReducedCropDataset


def test_about_half_the_samples_are_flipped(tmp_path):
    ramp = np.repeat(np.linspace(0, 255, 32, dtype=np.uint8)[None, :, None], 32, axis=0).repeat(3, axis=2)
    Image.fromarray(ramp).save(tmp_path / "ramp.png")  # dark on the left, bright on the right
    dataset = ReducedCropDataset([(str(tmp_path / "ramp.png"), 0)] * 200, 16, scale=(1.0, 1.0), ratio=(1.0, 1.0))
    torch.manual_seed(0)
    flipped = [bool(pixels[0, :, 0].float().mean() > pixels[0, :, -1].float().mean()) for pixels, _ in dataset]
    assert 0.38 < sum(flipped) / len(flipped) < 0.62
