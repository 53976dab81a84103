"""The traditional SR pipelines the lessons measure: aligned pairs, and float32 stores at HR size."""

from __future__ import annotations

from helpers.course.baselines import InMemoryNaiveSRDataset, NaiveSRDataset
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
