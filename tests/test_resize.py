"""helpers.resize against MATLAB's imresize(..., 'bicubic'): weights derived by hand, properties, a slow loop-based
NumPy transcription of MATLAB's algorithm, and the bicubic-baseline PSNR gap to F.interpolate on real photographs."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from skimage import data as skdata

from helpers.resize import downscale, imresize, upscale

# --- Keys' cubic kernel (a = -0.5) at the distances the small cases below need, written out by hand -------------
# |d| <= 1: 1.5|d|^3 - 2.5|d|^2 + 1        1 < |d| <= 2: -0.5|d|^3 + 2.5|d|^2 - 4|d| + 2
K025 = 1.5 * 0.25**3 - 2.5 * 0.25**2 + 1  # 0.8671875
K075 = 1.5 * 0.75**3 - 2.5 * 0.75**2 + 1  # 0.2265625
K125 = -0.5 * 1.25**3 + 2.5 * 1.25**2 - 4 * 1.25 + 2  # -0.0703125
K175 = -0.5 * 1.75**3 + 2.5 * 1.75**2 - 4 * 1.75 + 2  # -0.0234375


def test_kernel_values_by_hand():
    assert (K025, K075, K125, K175) == (0.8671875, 0.2265625, -0.0703125, -0.0234375)
    assert K025 + K075 + K125 + K175 == 1.0  # so the taps below need no normalising


def _dense(rows: list[tuple[list[int], list[float]]], in_len: int) -> np.ndarray:
    """(out, in) matrix from per-output (1-based mirrored input indices, weights), repeated indices adding up."""
    matrix = np.zeros((len(rows), in_len))
    for out, (indices, weights) in enumerate(rows):
        for i, w in zip(indices, weights):
            matrix[out, i - 1] += w
    return matrix


def _matrix_of(in_len: int, scale: float) -> np.ndarray:
    """What imresize does to each one-hot row of length in_len (a 1 x in_len image): column j is its response to e_j."""
    one_hots = torch.eye(in_len, dtype=torch.float64).view(in_len, 1, 1, in_len)
    return imresize(one_hots, scale)[:, 0, 0, :].numpy().T


def test_downscale_8_by_half_matches_hand_derived_weights():
    # Antialiased: kernel x -> 0.5 * k(0.5 x), width 4 / 0.5 = 8; u = 2x - 0.5, taps u-3.5 .. u+3.5 (the two extra of
    # the P = 10 sit at |0.5 d| >= 2 and are zero). Distances 3.5, 2.5, 1.5, 0.5, -0.5, ..., -3.5 halve to k(1.75)..
    w = [0.5 * k for k in (K175, K125, K075, K025, K025, K075, K125, K175)]
    assert w[:4] == [-0.01171875, -0.03515625, 0.11328125, 0.43359375]
    # Taps (1-based) 2x-4 .. 2x+3, mirrored: 0 -> 1, -1 -> 2, -2 -> 3, 9 -> 8, 10 -> 7, 11 -> 6.
    rows = [
        ([3, 2, 1, 1, 2, 3, 4, 5], w),  # x = 1, taps -2..5
        ([1, 1, 2, 3, 4, 5, 6, 7], w),  # x = 2, taps 0..7
        ([2, 3, 4, 5, 6, 7, 8, 8], w),  # x = 3, taps 2..9
        ([4, 5, 6, 7, 8, 8, 7, 6], w),  # x = 4, taps 4..11
    ]
    expected = _dense(rows, 8)
    np.testing.assert_allclose(expected[0], [0.546875, 0.3984375, 0.1015625, -0.03515625, -0.01171875, 0, 0, 0])
    np.testing.assert_allclose(_matrix_of(8, 0.5), expected, atol=1e-6)
    ramp = torch.arange(1, 9, dtype=torch.float64).view(1, 1, 8)
    np.testing.assert_allclose(imresize(ramp, 0.5)[0, 0].numpy(), expected @ np.arange(1, 9), atol=1e-6)


def test_upscale_4_by_2_matches_hand_derived_weights():
    # No stretching: u = x / 2 + 0.25 = 0.75, 1.25, ..., 4.25; four taps floor(u) - 1 .. floor(u) + 2.
    a = [K175, K075, K025, K125]  # u = n + 0.75: distances 1.75, 0.75, -0.25, -1.25
    b = [K125, K025, K075, K175]  # u = n + 0.25: distances 1.25, 0.25, -0.75, -1.75
    rows = [  # mirrored: -1 -> 2, 0 -> 1, 5 -> 4, 6 -> 3
        ([2, 1, 1, 2], a),  # u = 0.75, taps -1..2
        ([1, 1, 2, 3], b),  # u = 1.25, taps 0..3
        ([1, 1, 2, 3], a),  # u = 1.75
        ([1, 2, 3, 4], b),  # u = 2.25
        ([1, 2, 3, 4], a),  # u = 2.75
        ([2, 3, 4, 4], b),  # u = 3.25, taps 2..5
        ([2, 3, 4, 4], a),  # u = 3.75
        ([3, 4, 4, 3], b),  # u = 4.25, taps 3..6
    ]
    expected = _dense(rows, 4)
    np.testing.assert_allclose(expected[0], [1.09375, -0.09375, 0, 0])
    np.testing.assert_allclose(_matrix_of(4, 2), expected, atol=1e-6)
    ramp = torch.tensor([[[0.0, 1.0, 3.0, 6.0]]], dtype=torch.float64)
    np.testing.assert_allclose(imresize(ramp, 2)[0, 0].numpy(), expected @ [0, 1, 3, 6], atol=1e-6)


def test_two_dimensional_response_is_the_outer_product_of_the_1d_weights():
    image = torch.zeros(1, 8, 8, dtype=torch.float64)
    image[0, 2, 5] = 1.0
    m = _matrix_of(8, 0.5)
    np.testing.assert_allclose(imresize(image, 0.5)[0].numpy(), np.outer(m[:, 2], m[:, 5]), atol=1e-12)


# --- properties ----------------------------------------------------------------------------------------------------
SCALES = [2, 3, 4, 1 / 2, 1 / 3, 1 / 4]


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("shape", [(1, 3, 13, 20), (2, 1, 24, 18), (3, 7, 9)])
def test_constant_stays_constant(shape, scale):
    out = imresize(torch.full(shape, 0.37, dtype=torch.float64), scale)
    np.testing.assert_allclose(out.numpy(), 0.37, atol=1e-12)
    out8 = imresize(torch.full(shape, 200, dtype=torch.uint8), scale)
    assert out8.dtype == torch.uint8 and bool((out8 == 200).all())


def test_scale_one_and_same_size_are_the_identity():
    image = torch.rand(2, 3, 11, 16)
    torch.testing.assert_close(imresize(image, 1), image, rtol=0, atol=0)
    torch.testing.assert_close(imresize(image, size=(11, 16)), image, rtol=0, atol=0)


@pytest.mark.parametrize("kwargs", [{"scale": s} for s in SCALES] + [{"size": (7, 29)}, {"size": (30, 5)}])
def test_mirror_symmetry(kwargs):
    image = torch.rand(1, 2, 12, 24, dtype=torch.float64)  # 12 and 24 divide by 2, 3, 4: the grid is symmetric
    for dim in (-1, -2):
        flipped = imresize(image.flip(dim), **kwargs)
        torch.testing.assert_close(flipped, imresize(image, **kwargs).flip(dim), rtol=0, atol=1e-6)


@pytest.mark.parametrize("scale", [0.3, 1 / 3, 0.25, 0.5, 1.5, 2, 2.7, 3, 4])
def test_output_size_is_ceil_of_in_times_scale(scale):
    for h, w in [(1, 7), (12, 13), (100, 31), (300, 5)]:
        out = imresize(torch.rand(1, h, w), scale)
        assert out.shape == (1, math.ceil(h * scale), math.ceil(w * scale))
    assert imresize(torch.rand(2, 3, 10, 20), size=(7, 45)).shape == (2, 3, 7, 45)


@pytest.mark.parametrize("kwargs", [{"scale": 2}, {"scale": 3}, {"scale": 4}, {"size": (9, 50)}])
def test_interior_of_an_upscaled_ramp_stays_on_the_ramp(kwargs):
    width = 20
    image = (0.1 + 0.05 * torch.arange(width, dtype=torch.float64)).expand(1, 9, width)
    out = imresize(image, **kwargs)[0, 0]
    scale = out.shape[0] / width
    u = torch.arange(1, out.shape[0] + 1, dtype=torch.float64) / scale + 0.5 * (1 - 1 / scale)
    interior = (u >= 3) & (u <= width - 2)  # every tap inside the image
    assert interior.sum() > width
    torch.testing.assert_close(out[interior], 0.1 + 0.05 * (u[interior] - 1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("scale", [1 / 4, 3])
def test_batched_equals_per_image_and_3d_equals_4d(scale):
    batch = torch.rand(4, 3, 17, 22)
    out = imresize(batch, scale)
    for i in range(4):
        torch.testing.assert_close(out[i], imresize(batch[i], scale), rtol=0, atol=1e-6)


@pytest.mark.parametrize("scale", [1 / 4, 1 / 3, 2, 4])
def test_float32_agrees_with_float64(scale):
    image = torch.rand(2, 3, 24, 19, dtype=torch.float64)
    out32 = imresize(image.float(), scale)
    assert out32.dtype == torch.float32
    torch.testing.assert_close(out32.double(), imresize(image, scale), rtol=0, atol=1e-5)


def test_downscale_and_upscale_are_imresize_by_one_over_scale_and_scale():
    image = torch.rand(1, 3, 24, 36)
    torch.testing.assert_close(downscale(image, 4), imresize(image, 0.25), rtol=0, atol=0)
    torch.testing.assert_close(upscale(image, 3), imresize(image, 3), rtol=0, atol=0)


def test_output_is_not_clamped():
    image = torch.zeros(1, 8, 8)
    image[:, :, 4:] = 1.0  # a step overshoots with a negative-lobed kernel
    out = upscale(image, 4)
    assert out.min() < 0 and out.max() > 1


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((torch.rand(8, 8), 2), {}, ValueError, r"\(C, H, W\) or \(N, C, H, W\)"),
        ((torch.rand(1, 1, 1, 8, 8), 2), {}, ValueError, r"got shape \(1, 1, 1, 8, 8\)"),
        ((torch.rand(1, 0, 8), 2), {}, ValueError, "H, W >= 1"),
        ((torch.rand(1, 8, 8),), {}, ValueError, "exactly one of scale"),
        ((torch.rand(1, 8, 8), 2), {"size": (4, 4)}, ValueError, "exactly one of scale"),
        ((torch.rand(1, 8, 8), 0), {}, ValueError, "positive finite"),
        ((torch.rand(1, 8, 8), -0.5), {}, ValueError, "positive finite"),
        ((torch.rand(1, 8, 8), float("nan")), {}, ValueError, "positive finite"),
        ((torch.rand(1, 8, 8), "2"), {}, ValueError, "positive finite"),
        ((torch.rand(1, 8, 8),), {"size": (4,)}, ValueError, r"\(height, width\)"),
        ((torch.rand(1, 8, 8),), {"size": (4, 0)}, ValueError, "positive ints"),
        ((torch.rand(1, 8, 8),), {"size": (4.5, 4)}, ValueError, "positive ints"),
        ((torch.ones(1, 8, 8, dtype=torch.int64), 2), {}, TypeError, "floating point or uint8"),
        ((np.ones((1, 8, 8)), 2), {}, TypeError, "torch.Tensor"),
    ],
)
def test_bad_arguments_say_what_to_pass(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        imresize(*args, **kwargs)


@pytest.mark.parametrize("bad", [0, -2, 2.5, True])
def test_wrappers_want_a_positive_int(bad):
    for fn in (downscale, upscale):
        with pytest.raises(ValueError, match="positive int"):
            fn(torch.rand(1, 8, 8), bad)


# --- independent slow reference: MATLAB's imresize transcribed loop by loop ------------------------------------------
def _ref_cubic(d: float) -> float:
    a = abs(d)
    if a <= 1:
        return 1.5 * a**3 - 2.5 * a**2 + 1
    if a <= 2:
        return -0.5 * a**3 + 2.5 * a**2 - 4 * a + 2
    return 0.0


def _ref_contributions(in_len: int, out_len: int, scale: float, antialias: bool) -> tuple[np.ndarray, np.ndarray]:
    """MATLAB's contributions(): per output pixel, zero-based input indices and weights (rows), zero columns dropped."""
    shrink = scale < 1 and antialias
    width = 4 / scale if shrink else 4.0
    taps = math.ceil(width) + 2
    aux = list(range(1, in_len + 1)) + list(range(in_len, 0, -1))  # symmetric: 1..n, n..1
    indices, weights = [], []
    for x in range(1, out_len + 1):
        u = x / scale + 0.5 * (1 - 1 / scale)
        left = math.floor(u - width / 2)
        row_idx = [left + p for p in range(taps)]
        row_w = [scale * _ref_cubic(scale * (u - j)) if shrink else _ref_cubic(u - j) for j in row_idx]
        total = sum(row_w)
        weights.append([w / total for w in row_w])
        indices.append([aux[(j - 1) % len(aux)] - 1 for j in row_idx])
    indices, weights = np.array(indices), np.array(weights)
    keep = [p for p in range(taps) if any(weights[:, p] != 0)]
    return indices[:, keep], weights[:, keep]


def ref_imresize(image: np.ndarray, scale: float | None = None, size=None, antialias: bool = True) -> np.ndarray:
    """MATLAB imresize(image, scale | [h w], 'bicubic') for an (H, W) or (H, W, C) array, one output pixel at a time."""
    in_hw = image.shape[:2]
    if size is None:
        size, scales = [math.ceil(n * scale) for n in in_hw], [scale, scale]
    else:
        scales = [size[0] / in_hw[0], size[1] / in_hw[1]]
    is_uint8 = image.dtype == np.uint8
    out = image.astype(np.float64)
    for dim in np.argsort(scales, kind="stable"):  # smaller scale first
        indices, weights = _ref_contributions(out.shape[dim], size[dim], scales[dim], antialias)
        moved = np.moveaxis(out, dim, 0)
        result = np.empty((size[dim],) + moved.shape[1:])
        for x in range(size[dim]):
            result[x] = sum(w * moved[i] for i, w in zip(indices[x], weights[x]))
        if is_uint8:  # MATLAB returns each pass as uint8: saturate, round half away from zero
            result = np.floor(np.clip(result, 0, 255) + 0.5)
        out = np.moveaxis(result, 0, dim)
    return out.astype(np.uint8) if is_uint8 else out


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("hw", [(13, 18), (24, 17)])
def test_matches_slow_matlab_transcription(hw, scale):
    image = np.random.default_rng(100 * hw[0] + hw[1]).random(hw)
    ours = imresize(torch.from_numpy(image)[None], scale)[0].numpy()
    np.testing.assert_allclose(ours, ref_imresize(image, scale), rtol=0, atol=1e-6)
    ours32 = imresize(torch.from_numpy(image).float()[None], scale)[0].numpy()
    np.testing.assert_allclose(ours32, ref_imresize(image, scale), rtol=0, atol=1e-6)


@pytest.mark.parametrize(("kwargs"), [{"size": (7, 40)}, {"size": (30, 6)}, {"scale": 0.3, "antialias": False}])
def test_matches_slow_matlab_transcription_sizes_and_no_antialias(kwargs):
    image = np.random.default_rng(1).random((15, 20, 3))
    ours = imresize(torch.from_numpy(image).permute(2, 0, 1), **kwargs).permute(1, 2, 0).numpy()
    np.testing.assert_allclose(ours, ref_imresize(image, **kwargs), rtol=0, atol=1e-6)


@pytest.mark.parametrize("kwargs", [{"scale": 1 / 3}, {"scale": 4}, {"size": (9, 50)}, {"size": (40, 7)}])
def test_uint8_rounds_and_saturates_each_pass_like_matlab(kwargs):
    image = np.random.default_rng(2).integers(0, 256, (3, 21, 16), dtype=np.uint8)
    image[:, :, :3] = 255  # bright edge next to random pixels: overshoot past 255 has to saturate
    ours = imresize(torch.from_numpy(image), **kwargs).numpy()
    ref = np.stack([ref_imresize(channel, **kwargs) for channel in image])
    assert ours.dtype == np.uint8 and ours.shape == ref.shape
    difference = np.abs(ours.astype(int) - ref)
    assert difference.max() <= 1 and (difference == 0).mean() > 0.999  # float32 vs double at exact .5 ties


# --- the documented difference on real photographs ----------------------------------------------------------------
def _photos() -> dict[str, np.ndarray]:
    photos = {"astronaut": skdata.astronaut(), "chelsea": skdata.chelsea(), "coffee": skdata.coffee()}
    return {name: p[: p.shape[0] - p.shape[0] % 12, : p.shape[1] - p.shape[1] % 12] for name, p in photos.items()}


def _to_uint8(image: np.ndarray) -> np.ndarray:
    return np.round(np.clip(image, 0, 1) * 255).astype(np.uint8)  # as BasicSR's tensor2img


def _psnr_y(sr: np.ndarray, hr: np.ndarray, border: int) -> float:
    """PSNR on BT.601 Y (Y = 16 + 65.481 R + 128.553 G + 24.966 B, RGB in [0, 1]) of (H, W, 3) uint8 images."""
    weights = np.array([65.481, 128.553, 24.966])
    y_sr, y_hr = (16 + (im.astype(np.float64) / 255) @ weights for im in (sr, hr))
    diff = (y_sr - y_hr)[border:-border, border:-border]
    return 10 * math.log10(255**2 / np.mean(diff**2))


def test_torch_bicubic_reads_higher_than_the_matlab_protocol_baseline():
    scale, rows = 4, []
    for name, hr in _photos().items():
        hr_t = torch.from_numpy(hr).permute(2, 0, 1)[None].float() / 255
        lr = _to_uint8(downscale(hr_t, scale)[0].permute(1, 2, 0).numpy())  # LR as a saved PNG holds it
        lr_t = torch.from_numpy(lr).permute(2, 0, 1)[None].float() / 255
        matlab = _to_uint8(upscale(lr_t, scale)[0].permute(1, 2, 0).numpy())
        torch_bicubic = F.interpolate(lr_t, scale_factor=scale, mode="bicubic", align_corners=False)
        torch_bicubic = _to_uint8(torch_bicubic[0].permute(1, 2, 0).numpy())
        # the same protocol through the slow reference, end to end
        ref_lr = _to_uint8(ref_imresize(hr.astype(np.float64) / 255, 1 / scale))
        ref_sr = _to_uint8(ref_imresize(ref_lr.astype(np.float64) / 255, scale))
        rows.append((name, *(_psnr_y(sr, hr, scale) for sr in (matlab, torch_bicubic, ref_sr))))
    print(f"\nbicubic x{scale} baseline PSNR-Y (dB), LR by MATLAB-protocol downscale:")
    for name, ours, torch_db, ref in rows + [("mean", *np.mean([r[1:] for r in rows], axis=0))]:
        print(
            f"  {name:10s} MATLAB protocol {ours:.4f}  F.interpolate {torch_db:.4f}  (+{torch_db - ours:.4f})  "
            f"NumPy reference {ref:.4f}"
        )
    for _, ours, _, ref in rows:
        assert abs(ours - ref) < 0.03
    gap = np.mean([torch_db - ours for _, ours, torch_db, _ in rows])
    assert 0.02 < gap < 0.5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")
def test_cuda_matches_cpu():
    image = torch.rand(2, 3, 30, 45)
    for kwargs in ({"scale": 1 / 4}, {"scale": 3}, {"size": (17, 90)}):
        on_gpu = imresize(image.cuda(), **kwargs)
        assert on_gpu.device.type == "cuda"
        torch.testing.assert_close(on_gpu.cpu(), imresize(image, **kwargs), rtol=0, atol=1e-5)
    pixels = (image * 255).round().to(torch.uint8)
    difference = (imresize(pixels.cuda(), 1 / 3).cpu().int() - imresize(pixels, 1 / 3).int()).abs()
    assert difference.max() <= 1


class TestInputChecks:
    """imresize's input checks at their edges: one-pixel images and one-pixel outputs are legal, an empty side or an
    infinite scale is refused, and each refusal names what was given."""

    def test_one_pixel_images_and_one_pixel_outputs_are_legal(self):
        column = torch.rand(1, 3, 5, 1)
        assert imresize(column, 2).shape == (1, 3, 10, 2)
        assert imresize(torch.rand(3, 1, 4), 2).shape == (3, 2, 8)
        assert imresize(torch.rand(1, 3, 6, 8), size=(1, 1)).shape == (1, 3, 1, 1)
        flat = torch.full((1, 3, 6, 8), 0.25)
        torch.testing.assert_close(imresize(flat, size=(1, 3)), torch.full((1, 3, 1, 3), 0.25))

    @pytest.mark.parametrize("shape", [(1, 3, 4, 0), (1, 3, 0, 4), (3, 5, 0), (4, 4)])
    def test_an_empty_side_or_a_missing_channel_axis_is_refused_with_the_shape(self, shape):
        with pytest.raises(ValueError, match=re.escape(f"got shape {shape}")):
            imresize(torch.rand(shape), 2)

    @pytest.mark.parametrize("scale", [math.inf, -math.inf, 0, -2, math.nan, True])
    def test_a_scale_that_is_not_a_positive_finite_number_is_refused(self, scale):
        with pytest.raises(ValueError, match="scale must be a positive finite number"):
            imresize(torch.rand(1, 3, 4, 4), scale)

    @pytest.mark.parametrize("size", [(0, 4), (4, 0), (4,), (2.0, 3), (True, 3)])
    def test_a_size_that_is_not_two_positive_ints_is_refused(self, size):
        with pytest.raises(ValueError, match="size must be"):
            imresize(torch.rand(1, 3, 4, 4), size=size)

    def test_a_non_tensor_is_refused_by_its_type(self):
        with pytest.raises(TypeError, match="not list"):
            imresize([[0.0]], 2)

    def test_scale_and_size_together_or_neither_are_refused_saying_so(self):
        for arguments in ({}, {"scale": 2, "size": (4, 4)}):
            with pytest.raises(
                ValueError, match="^" + re.escape("pass exactly one of scale (a factor: 0.25 shrinks by 4")
            ):
                imresize(torch.rand(1, 3, 4, 4), **arguments)

    def test_a_2d_image_is_told_to_add_a_channel_axis(self):
        with pytest.raises(
            ValueError, match="; " + re.escape("give a 2-D image a channel axis with image[None]") + "$"
        ):
            imresize(torch.rand(4, 4), 2)
