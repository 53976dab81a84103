"""Classification augmentation on batches already on the device, with a different random draw per sample (kornia),
plus normalisation and its inverse for display.

Copy with: images.py (the uint8 to float conversion).
Needs: torch, kornia, numpy, pillow (the last two through images.py).
"""

from __future__ import annotations

import kornia.augmentation as K
import torch

from .images import to_unit_float


CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)


class ToUnitFloat(torch.nn.Module):
    """uint8 images (0..255) to float in [0, 1] on whatever device they are on; float input passes through."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Convert a uint8 batch to float32 in [0, 1]."""
        return to_unit_float(images)


class BatchRandomCrop(torch.nn.Module):
    """Random crops of `size` after `padding` reflect-padding, a different offset per sample, in one gather.

    Hand-written because kornia's RandomCrop cuts sample by sample in a Python loop (about 45,000 32-px images/s on
    two CPU cores), which makes it the slowest step of a CIFAR batch pipeline; one indexed gather does the batch.
    """

    def __init__(self, size: int, padding: int = 4) -> None:
        super().__init__()
        self.size, self.padding = size, padding

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Crop a (B, C, H, W) batch to (B, C, size, size)."""
        batch, channels, height, width = images.shape
        padded = torch.nn.functional.pad(images, [self.padding] * 4, mode="reflect")
        max_y, max_x = height + 2 * self.padding - self.size, width + 2 * self.padding - self.size
        ys = torch.randint(0, max_y + 1, (batch, 1, 1, 1), device=images.device)
        xs = torch.randint(0, max_x + 1, (batch, 1, 1, 1), device=images.device)
        ramp = torch.arange(self.size, device=images.device)
        rows = (ys + ramp.view(1, 1, -1, 1)).expand(batch, channels, self.size, padded.shape[3])
        rows_cut = torch.gather(padded, 2, rows)  # (B, C, size, W + 2p): each sample's rows
        cols = (xs + ramp.view(1, 1, 1, -1)).expand(batch, channels, self.size, self.size)
        return torch.gather(rows_cut, 3, cols)  # (B, C, size, size)


def cifar_train_augment(
    *,
    mean: tuple[float, ...] = CIFAR10_MEAN,
    std: tuple[float, ...] = CIFAR10_STD,
    padding: int = 4,
    jitter: float = 0.2,
    jitter_p: float = 0.8,
    grayscale_p: float = 0.2,
    size: int = 32,
) -> torch.nn.Sequential:
    """Batch augmentation for 32-px classification, per sample, on the batch's device: uint8 -> float, random crop
    with reflect padding, then kornia's horizontal flip, ColorJitter (brightness, contrast, saturation) with a
    probability, RandomGrayscale, and Normalize.
    """
    return torch.nn.Sequential(
        ToUnitFloat(),
        BatchRandomCrop(size, padding),
        K.RandomHorizontalFlip(),
        K.ColorJitter(jitter, jitter, jitter, 0.0, p=jitter_p),
        K.RandomGrayscale(p=grayscale_p),
        K.Normalize(torch.tensor(mean), torch.tensor(std)),
    )


def normalize_only(mean: tuple[float, ...] = CIFAR10_MEAN, std: tuple[float, ...] = CIFAR10_STD) -> torch.nn.Sequential:
    """Evaluation preprocessing on the device: uint8 -> float in [0, 1] -> Normalize."""
    return torch.nn.Sequential(ToUnitFloat(), K.Normalize(torch.tensor(mean), torch.tensor(std)))


def denormalize(
    images: torch.Tensor, *, mean: tuple[float, ...] = CIFAR10_MEAN, std: tuple[float, ...] = CIFAR10_STD
) -> torch.Tensor:
    """Undo Normalize for display: images * std + mean, clamped to [0, 1]."""
    shape = (1, -1, 1, 1) if images.ndim == 4 else (-1, 1, 1)
    std_t = torch.tensor(std, device=images.device).view(shape)
    mean_t = torch.tensor(mean, device=images.device).view(shape)
    return (images * std_t + mean_t).clamp(0, 1)
