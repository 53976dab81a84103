"""The SR protocol's exact pixels and baseline, and a file on disk re-verified: the kept window is the top-left
H - H % s, W - W % s of the decoded file (in the evaluation set and in the cache), evaluate_sr's bicubic baseline is
psnr_y(bicubic_upscale(lr), hr) with MATLAB's resize (not torch's bicubic), and a wrong file already at `dest` is a
checksum error, not a download skipped."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from helpers.download import ChecksumMismatchError, download
from helpers.evaluation import evaluate_sr
from helpers.metrics import psnr_y
from helpers.resize import downscale, upscale
from helpers.sr_cache import DecodedSRCache
from helpers.sr_data import SREvalDataset, mod_crop

SIZES = [(27, 22), (41, 35)]  # (width, height): trimmed by 3 and 2, then 1 and 3 pixels at scale 4


@pytest.fixture(scope="module")
def noise_images(tmp_path_factory):
    """PNG files of random pixels (every pixel differs from its neighbours: a shifted window is plainly wrong)."""
    folder = tmp_path_factory.mktemp("noise")
    rng = np.random.default_rng(0)
    for index, (width, height) in enumerate(SIZES):
        Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(folder / f"n{index}.png")
    return folder


def _decoded(path) -> torch.Tensor:
    return _decoded_from(Image.open(path).convert("RGB"))


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_the_kept_window_is_the_top_left_multiple_of_the_scale(noise_images, scale):
    paths = sorted(noise_images.iterdir())
    evaluation, cache = SREvalDataset(paths, scale=scale), DecodedSRCache(paths, scale=scale)
    for index, path in enumerate(paths):
        full = _decoded(path)
        height, width = full.shape[1] - full.shape[1] % scale, full.shape[2] - full.shape[2] % scale
        window = full[:, :height, :width]
        assert torch.equal(_decoded_from(mod_crop(Image.open(path).convert("RGB"), scale)), window)
        lr, hr = evaluation[index]
        assert torch.equal((hr * 255).round().to(torch.uint8), window)
        assert torch.equal((lr * 255).round().to(torch.uint8), downscale(window, scale))
        cache_lr, cache_hr = cache.image(index)
        assert torch.equal(cache_hr, window) and torch.equal(cache_lr, downscale(window, scale))


def _decoded_from(image: Image.Image) -> torch.Tensor:
    return torch.from_numpy(np.array(image)).permute(2, 0, 1)


class _Nearest(torch.nn.Module):
    """A stand-in SR model: nearest-neighbour upscaling (any model will do; the baseline must not depend on it)."""

    def __init__(self, scale: int) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, lr: torch.Tensor) -> torch.Tensor:
        return F.interpolate(lr, scale_factor=self.scale, mode="nearest")


def test_the_bicubic_baseline_is_matlabs_computed_directly(noise_images):
    scale = 4
    dataset = SREvalDataset(sorted(noise_images.iterdir()), scale=scale)
    result = evaluate_sr(_Nearest(scale), dataset, scale=scale, device="cpu")
    direct, torch_bicubic = [], []
    for lr, hr in dataset:
        lr, hr = lr[None], hr[None]
        direct.append(float(psnr_y(upscale(lr, scale).clamp(0, 1), hr, scale)))
        torch_made = F.interpolate(lr, scale_factor=scale, mode="bicubic", align_corners=False).clamp(0, 1)
        torch_bicubic.append(float(psnr_y(torch_made, hr, scale)))
    assert result["per_image_bicubic_psnr_y"] == pytest.approx(direct, abs=1e-9)
    assert result["bicubic_psnr_y"] == pytest.approx(float(np.mean(direct)), abs=1e-9)
    # the trap lesson 05 teaches is visible on these images: torch's bicubic scores differently
    assert min(abs(a - b) for a, b in zip(direct, torch_bicubic, strict=True)) > 1e-3
    model = [float(psnr_y(_Nearest(scale)(lr[None]).clamp(0, 1), hr[None], scale)) for lr, hr in dataset]
    assert result["psnr_gain_db"] == pytest.approx(float(np.mean(model)) - float(np.mean(direct)), abs=1e-9)


def test_a_wrong_file_already_at_dest_is_a_checksum_error(tmp_path):
    right, wrong = b"the published bytes", b"something else entirely"
    dest = tmp_path / "data.bin"
    dest.write_bytes(wrong)
    unreachable = "http://127.0.0.1:9/never-asked"  # a file at dest is verified before any transfer
    with pytest.raises(ChecksumMismatchError, match=str(dest)):
        download(unreachable, dest, sha256=hashlib.sha256(right).hexdigest(), progress=False)
    assert dest.read_bytes() == wrong  # nothing lost: the user decides what to delete
    dest.write_bytes(right)
    assert download(unreachable, dest, sha256=hashlib.sha256(right).hexdigest(), progress=False) == dest
    with pytest.raises(ChecksumMismatchError):
        download(unreachable, dest, md5=hashlib.md5(wrong).hexdigest(), progress=False)
