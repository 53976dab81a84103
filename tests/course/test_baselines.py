"""The traditional SR pipelines the lessons measure: aligned pairs, float32 stores at HR size, and their memory against
the uint8 cache by scale."""

from __future__ import annotations

import numpy as np
from PIL import Image

from helpers.course.baselines import InMemoryNaiveSRDataset, NaiveSRDataset, sr_memory_by_scale
from helpers.sr_cache import DecodedSRCache
from helpers.sr_data import bicubic_downscale


def test_naive_rungs_align(photo_dir):
    for dataset in (
        NaiveSRDataset(photo_dir, scale=4, hr_crop=64, seed=0),
        InMemoryNaiveSRDataset(photo_dir, scale=4, hr_crop=64, seed=0),
    ):
        for index in range(len(dataset)):
            upscaled, hr = dataset[index]
            assert upscaled.shape == hr.shape == (3, 64, 64)
            lr_of_input, lr_of_hr = bicubic_downscale(upscaled, 4), bicubic_downscale(hr, 4)
            aligned = float((lr_of_input - lr_of_hr)[..., 2:-2, 2:-2].abs().mean())
            shifted = float((lr_of_input[..., 1:, 1:] - lr_of_hr[..., :-1, :-1])[..., 2:-2, 2:-2].abs().mean())
            assert aligned < 0.03 and aligned < shifted
        if hasattr(dataset, "cleanup"):
            dataset.cleanup()


def test_in_memory_naive_holds_float_inputs_at_hr_size(photo_dir):
    dataset = InMemoryNaiveSRDataset(photo_dir, scale=4, hr_crop=64)
    cache = DecodedSRCache(photo_dir, scale=4)
    pixels = sum(t.shape[1] * t.shape[2] for t in dataset.targets)
    assert dataset.nbytes == 2 * 3 * pixels * 4  # float32 upscaled input + float32 HR
    assert cache.nbytes == 4 * pixels + 4 * pixels // 16  # uint8 RGBX HR + uint8 RGBX LR


def _photos(tmp_path, count=3):
    rng = np.random.default_rng(0)
    for i in range(count):
        Image.fromarray(rng.integers(0, 256, (130, 150, 3), dtype=np.uint8)).save(tmp_path / f"p{i}.png")
    return sorted(tmp_path.glob("*.png"))


def test_memory_accounting_by_scale(tmp_path):
    rows = sr_memory_by_scale(_photos(tmp_path), scales=(2, 4))
    for row in rows:
        s = row["scale"]
        # float32 inputs at HR size against uint8 LR: 4 bytes x s^2 pixels (exact up to the mod-crop)
        assert abs(row["input_ratio"] - 4 * s * s) < 0.02 * 4 * s * s
        # float32 input + HR (8 bytes per HR pixel per channel) against RGBX uint8 HR + LR (4/3 per channel)
        assert abs(row["total_ratio"] - 6 / (1 + 1 / s**2)) < 0.02 * row["total_ratio"]
