"""Augmentation on batches already on the device, with per-sample randomness."""

from __future__ import annotations

import torch


def dihedral(tensor: torch.Tensor, choice: int) -> torch.Tensor:
    """One of the 8 flips/90-degree rotations of a (..., H, W) tensor: bit 0 flips x, bit 1 flips y, bit 2 transposes."""
    flips = [d for bit, d in ((1, -1), (2, -2)) if choice & bit]
    if flips:
        tensor = tensor.flip(flips)  # one copy at most; the transpose below is a free view
    return tensor.transpose(-1, -2) if choice & 4 else tensor


def paired_dihedral(
    lr: torch.Tensor, hr: torch.Tensor, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Give each (LR, HR) pair of square (B, C, h, w) / (B, C, H, W) batches its own random flip/rot90, the same on both.

    Works on whatever device the batches are on: samples are grouped by the drawn transform (8 groups at most), so
    the cost is a few batched copies, not a Python loop over samples.
    """
    if lr.shape[0] != hr.shape[0]:
        raise ValueError(f"LR and HR batches differ in size: {lr.shape[0]} vs {hr.shape[0]}")
    if lr.shape[-1] != lr.shape[-2] or hr.shape[-1] != hr.shape[-2]:
        raise ValueError(f"rot90 needs square crops, got LR {tuple(lr.shape[-2:])} and HR {tuple(hr.shape[-2:])}")
    choices = torch.randint(0, 8, (lr.shape[0],), generator=generator)
    out_lr, out_hr = torch.empty_like(lr), torch.empty_like(hr)
    for choice in choices.unique().tolist():
        index = (choices == choice).nonzero().flatten().to(lr.device)
        for source, target in ((lr, out_lr), (hr, out_hr)):
            target.index_copy_(0, index, dihedral(source.index_select(0, index), choice))
    return out_lr, out_hr


CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)


class ToUnitFloat(torch.nn.Module):
    """uint8 images (0..255) to float in [0, 1] on whatever device they are on; float input passes through."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Convert a uint8 batch to float32 in [0, 1]."""
        return images.float().div_(255) if images.dtype == torch.uint8 else images


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
    import kornia.augmentation as K

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
    import kornia.augmentation as K

    return torch.nn.Sequential(ToUnitFloat(), K.Normalize(torch.tensor(mean), torch.tensor(std)))


class PairedSRAugment(torch.nn.Module):
    """Augment (LR, HR) super-resolution pairs on the device: the same random flip/rot90 and, with probability
    `jitter_p`, the same kornia ColorJitter on both images of each pair, each pair drawn independently."""

    def __init__(self, jitter: float = 0.0, jitter_p: float = 0.5) -> None:
        super().__init__()
        import kornia.augmentation as K

        self.jitter = K.ColorJitter(jitter, jitter, jitter, 0.0, p=jitter_p) if jitter > 0 else None

    def forward(self, lr: torch.Tensor, hr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return augmented float (lr, hr) batches."""
        lr, hr = paired_dihedral(ToUnitFloat()(lr), ToUnitFloat()(hr))
        if self.jitter is not None:
            lr = self.jitter(lr)
            hr = self.jitter(hr, params=self.jitter._params)  # colour parameters do not depend on image size
        return lr, hr


def denormalize(
    images: torch.Tensor, mean: tuple[float, ...] = CIFAR10_MEAN, std: tuple[float, ...] = CIFAR10_STD
) -> torch.Tensor:
    """Undo Normalize for display: images * std + mean, clamped to [0, 1]."""
    shape = (1, -1, 1, 1) if images.ndim == 4 else (-1, 1, 1)
    std_t = torch.tensor(std, device=images.device).view(shape)
    mean_t = torch.tensor(mean, device=images.device).view(shape)
    return (images * std_t + mean_t).clamp(0, 1)
