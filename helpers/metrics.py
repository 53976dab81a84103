"""Metrics as papers compute them: PSNR and SSIM on the BT.601 Y channel with the border cropped, the bicubic baseline,
and top-1 accuracy.

Example:
    >>> hr = torch.linspace(0, 1, 24).expand(1, 3, 24, 24)  # (N, 3, H, W) in [0, 1]
    >>> sr = quantize(hr * 0.95)  # what a saved 8-bit result holds
    >>> psnr_y(hr, hr, scale=2), round(psnr_y(sr, hr, scale=2).item(), 2), round(ssim_y(sr, hr, scale=2).item(), 4)
    (tensor([inf], dtype=torch.float64), 32.37, 0.9979)
    >>> top1_accuracy(torch.tensor([[2.0, 1.0], [0.0, 3.0]]), torch.tensor([0, 0]))
    0.5

Copy with: resize.py (MATLAB-compatible bicubic for the baseline).
Needs: torch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .resize import upscale


def rgb_to_y(images: torch.Tensor) -> torch.Tensor:
    """Y of BT.601 studio range, as MATLAB's rgb2ycbcr: RGB in [0, 1] -> Y in [16, 235], shape (N, 1, H, W)."""
    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"expected an (N, 3, H, W) RGB batch, got shape {tuple(images.shape)}")
    weights = torch.tensor([65.481, 128.553, 24.966], dtype=torch.float64, device=images.device).view(1, 3, 1, 1)
    return 16.0 + (images.double() * weights).sum(dim=1, keepdim=True)


def quantize(images: torch.Tensor) -> torch.Tensor:
    """Round float images in [0, 1] to the 256 levels of an 8-bit file (what a saved SR result holds)."""
    return images.clamp(0, 1).mul(255).round_().div_(255)


def _prepare(sr: torch.Tensor, hr: torch.Tensor, scale: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Both images rounded to 8 bits (as BasicSR scores saved results), to Y, with `scale` border pixels cropped."""
    if sr.shape != hr.shape:
        raise ValueError(f"SR and HR shapes differ: {tuple(sr.shape)} vs {tuple(hr.shape)}")
    sr_y, hr_y = rgb_to_y(quantize(sr)), rgb_to_y(quantize(hr))
    if scale > 0:
        sr_y, hr_y = sr_y[..., scale:-scale, scale:-scale], hr_y[..., scale:-scale, scale:-scale]
    return sr_y, hr_y


def psnr_y(sr: torch.Tensor, hr: torch.Tensor, scale: int) -> torch.Tensor:
    """Per-image PSNR (dB) on Y with `scale` border pixels cropped; identical images give +inf."""
    sr_y, hr_y = _prepare(sr, hr, scale)
    mse = (sr_y - hr_y).pow(2).mean(dim=(1, 2, 3))
    return 10 * torch.log10(255.0**2 / mse)  # mse == 0 -> +inf, as it should be


def _gaussian_kernel(size: int = 11, sigma: float = 1.5, device: torch.device | None = None) -> torch.Tensor:
    coords = torch.arange(size, dtype=torch.float64, device=device) - (size - 1) / 2
    kernel = torch.exp(-(coords**2) / (2 * sigma**2))
    return kernel / kernel.sum()


def _window_mean(images: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """'Valid' filtering with the 2-D Gaussian window as two 1-D passes (the window is separable: same result)."""
    size = kernel.numel()
    return F.conv2d(F.conv2d(images, kernel.view(1, 1, size, 1)), kernel.view(1, 1, 1, size))


def ssim_y(sr: torch.Tensor, hr: torch.Tensor, scale: int) -> torch.Tensor:
    """Per-image SSIM on Y (0..255) with `scale` border pixels cropped, as the reference MATLAB code computes it.

    Hand-written because the standard evaluates only where the 11x11 Gaussian window (sigma 1.5) fits inside the
    image ('valid' filtering, as MATLAB's ssim_index and BasicSR do); kornia's SSIM pads the borders instead.
    """
    sr_y, hr_y = _prepare(sr, hr, scale)
    kernel = _gaussian_kernel(device=sr_y.device)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mu_x, mu_y = _window_mean(sr_y, kernel), _window_mean(hr_y, kernel)
    sigma_x = _window_mean(sr_y * sr_y, kernel) - mu_x**2
    sigma_y = _window_mean(hr_y * hr_y, kernel) - mu_y**2
    sigma_xy = _window_mean(sr_y * hr_y, kernel) - mu_x * mu_y
    ssim_map = ((2 * mu_x * mu_y + c1) * (2 * sigma_xy + c2)) / ((mu_x**2 + mu_y**2 + c1) * (sigma_x + sigma_y + c2))
    return ssim_map.mean(dim=(1, 2, 3))


def bicubic_upscale(lr: torch.Tensor, scale: int) -> torch.Tensor:
    """The bicubic baseline as papers make it: MATLAB's bicubic upscale of an LR batch by `scale`, clamped to [0, 1]."""
    return upscale(lr, scale).clamp(0, 1)


def top1_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of samples whose highest logit is the label."""
    return float((logits.argmax(dim=1) == labels).float().mean())
