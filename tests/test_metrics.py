"""Metrics against independent references: scikit-image's PSNR and SSIM on a Y channel computed from the formula."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from helpers.metrics import bicubic_upscale, psnr_y, quantize, rgb_to_y, ssim_y, top1_accuracy
from helpers.resize import upscale


def _y_by_formula(image: np.ndarray) -> np.ndarray:
    """MATLAB rgb2ycbcr's Y for an (H, W, 3) float RGB image in [0, 1]."""
    return 16 + 65.481 * image[..., 0] + 128.553 * image[..., 1] + 24.966 * image[..., 2]


@pytest.fixture
def pair():
    """8-bit images (as files hold), so that the metrics' rounding to 8 bits changes nothing."""
    rng = np.random.default_rng(0)
    hr = rng.integers(0, 256, (2, 3, 40, 48))
    sr = np.clip(hr + rng.normal(0, 12, hr.shape).round(), 0, 255)
    return torch.from_numpy(sr / 255).float(), torch.from_numpy(hr / 255).float()


def test_y_channel_matches_the_formula(pair):
    sr, _ = pair
    expected = _y_by_formula(sr[0].permute(1, 2, 0).double().numpy())
    np.testing.assert_allclose(rgb_to_y(sr)[0, 0].numpy(), expected, rtol=0, atol=1e-9)


@pytest.mark.parametrize("scale", [2, 4])
def test_psnr_and_ssim_match_scikit_image_on_y(pair, scale):
    sr, hr = pair
    psnr, ssim = psnr_y(sr, hr, scale), ssim_y(sr, hr, scale)
    for index in range(len(sr)):
        y_sr = _y_by_formula(sr[index].permute(1, 2, 0).double().numpy())[scale:-scale, scale:-scale]
        y_hr = _y_by_formula(hr[index].permute(1, 2, 0).double().numpy())[scale:-scale, scale:-scale]
        assert psnr[index].item() == pytest.approx(peak_signal_noise_ratio(y_hr, y_sr, data_range=255), abs=1e-6)
        reference = structural_similarity(
            y_hr, y_sr, data_range=255, gaussian_weights=True, sigma=1.5, use_sample_covariance=False
        )
        assert ssim[index].item() == pytest.approx(reference, abs=1e-6)


def test_identical_images_give_infinite_psnr_and_unit_ssim(pair):
    _, hr = pair
    assert math.isinf(psnr_y(hr, hr, 4)[0].item()) and psnr_y(hr, hr, 4)[0].item() > 0
    assert ssim_y(hr, hr, 4)[0].item() == pytest.approx(1.0)


def test_a_known_noise_level_gives_its_known_psnr():
    hr = torch.full((1, 3, 64, 64), 128 / 255)
    # one 8-bit level up or down on every channel moves Y by d = (65.481 + 128.553 + 24.966) / 255 on every pixel:
    # MSE = d^2 exactly, so PSNR = 20 log10(255 / d)
    d = (65.481 + 128.553 + 24.966) / 255
    signs = torch.where(torch.rand(1, 1, 64, 64, generator=torch.Generator().manual_seed(0)) < 0.5, -1.0, 1.0)
    sr = hr + signs / 255
    assert psnr_y(sr, hr, 4).item() == pytest.approx(20 * math.log10(255 / d), abs=1e-3)


def test_scores_are_computed_on_8_bit_results(pair):
    sr, hr = pair
    nudged = sr + 0.3 / 255  # less than half a level: a saved 8-bit result would be identical
    assert torch.equal(psnr_y(nudged, hr, 4), psnr_y(sr, hr, 4))
    assert torch.equal(quantize(nudged), quantize(sr))


def test_border_is_cropped():
    hr = torch.rand(1, 3, 32, 32)
    sr = hr.clone()
    sr[..., :4, :] = 0  # damage only the 4-pixel border
    assert math.isinf(psnr_y(sr, hr, 4).item())
    assert not math.isinf(psnr_y(sr, hr, 2).item())


def test_the_bicubic_baseline_is_matlabs_upscale_clamped():
    lr = torch.zeros(2, 3, 8, 8)
    lr[..., ::2, ::2] = 1.0  # a checkerboard: bicubic overshoots past 0 and 1 between its squares
    raw, baseline = upscale(lr, 4), bicubic_upscale(lr, 4)
    assert baseline.shape == (2, 3, 32, 32) and raw.min() < 0 and raw.max() > 1
    assert torch.equal(baseline, raw.clamp(0, 1))
    flat = torch.full((1, 3, 6, 6), 0.3)
    torch.testing.assert_close(bicubic_upscale(flat, 3), torch.full((1, 3, 18, 18), 0.3))  # weights sum to 1


def test_top1_accuracy():
    logits = torch.tensor([[2.0, 1.0], [0.0, 3.0], [5.0, 1.0]])
    assert top1_accuracy(logits, torch.tensor([0, 1, 1])) == pytest.approx(2 / 3)


def test_ssim_matches_scikit_image_where_the_luminance_term_decides():
    # a dark result against a brighter truth: the means differ, so the constant c1 = (0.01 * 255)**2 shows
    rng = np.random.default_rng(1)
    hr = np.clip(60 + rng.normal(0, 20, (1, 3, 32, 32)).round(), 0, 255)
    sr = np.clip(hr * 0.3, 0, 255).round()
    sr_t, hr_t = torch.from_numpy(sr / 255).float(), torch.from_numpy(hr / 255).float()
    y_sr = _y_by_formula(sr_t[0].permute(1, 2, 0).double().numpy())[2:-2, 2:-2]
    y_hr = _y_by_formula(hr_t[0].permute(1, 2, 0).double().numpy())[2:-2, 2:-2]
    reference = structural_similarity(
        y_hr, y_sr, data_range=255, gaussian_weights=True, sigma=1.5, use_sample_covariance=False
    )
    assert ssim_y(sr_t, hr_t, 2).item() == pytest.approx(reference, abs=1e-6)


def test_a_scale_of_1_crops_one_pixel_and_0_crops_none():
    hr = torch.rand(1, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    sr = hr.clone()
    sr[..., 0, :] = 1 - sr[..., 0, :]  # damage only the outermost row
    assert math.isinf(psnr_y(sr, hr, 1).item())
    assert math.isfinite(psnr_y(sr, hr, 0).item())  # nothing cropped: the damage counts (and no empty image)
    assert math.isfinite(psnr_y(hr.flip(-1), hr, 0).item())


def test_quantize_clamps_to_the_8_bit_range():
    values = torch.tensor([-0.5, 0.0, 0.4 / 255, 0.6 / 255, 1.0, 1.7])
    assert torch.equal(quantize(values), torch.tensor([0.0, 0.0, 0.0, 1 / 255, 1.0, 1.0]))


@pytest.mark.parametrize("shape", [(3, 8, 8), (1, 4, 8, 8), (1, 1, 8, 8)])
def test_anything_but_an_rgb_batch_is_refused_with_its_shape(shape):
    with pytest.raises(ValueError, match=r"expected an \(N, 3, H, W\) RGB batch, got shape " + re.escape(str(shape))):
        rgb_to_y(torch.zeros(shape))


def test_sr_and_hr_of_different_shapes_are_refused_with_both_shapes():
    with pytest.raises(ValueError, match=re.escape("(1, 3, 8, 8) vs (1, 3, 8, 9)")):
        psnr_y(torch.zeros(1, 3, 8, 8), torch.zeros(1, 3, 8, 9), 2)
