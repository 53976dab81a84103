"""Classification augmentation on batches already on the device, with a different random draw per sample (kornia),
plus normalisation and its inverse for display. Crop and flip run on the uint8 batch (a quarter of float's bytes);
without colour jitter the conversion to normalised float is then one pass: to float, multiply-add in place.

A dataset's statistics are never hidden behind a generic name: `normalize_only` and `denormalize` take the mean and
std you give them (CIFAR10_MEAN / CIFAR10_STD here, device_crop.IMAGENET_MEAN / IMAGENET_STD, or your own); only the
functions named for CIFAR default to CIFAR's. The normalised output is channels_last unless `channels_last=False`
(each function that chooses says so, and the module's repr shows it).

Example:
    >>> images = torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8)  # a uint8 batch, on any device
    >>> out = cifar_train_augment()(images)  # crop, flip and jitter drawn per sample, then normalised float
    >>> out.shape, out.dtype, out.is_contiguous(memory_format=torch.channels_last)
    (torch.Size([8, 3, 32, 32]), torch.float32, True)

Copy with: images.py (the uint8 to float conversion).
Needs: torch, kornia, numpy, pillow (the last two through images.py).
"""

from __future__ import annotations

import kornia.augmentation as K
import torch

from .images import to_unit_float

CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
# The std of pytorch/examples-style CIFAR scripts (kuangliu/pytorch-cifar and the many copied from it): the
# torchvision recipe `Normalize((0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010))`.
TORCHVISION_RECIPE_STD = (0.2023, 0.1994, 0.2010)


class ToUnitFloat(torch.nn.Module):
    """uint8 images (0..255) to float in [0, 1] on whatever device they are on; float input passes through."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Convert a uint8 batch to float32 in [0, 1]."""
        return to_unit_float(images)


class BatchRandomCrop(torch.nn.Module):
    """Random crops of `size` after `padding` pixels of padding ("reflect", or "constant": zeros, as torchvision's
    RandomCrop(padding=...)), a different offset per sample, in one indexed copy; any dtype, uint8 included. With
    `flip_p` the same copy also flips each sample left-right with that probability (no extra pass over the batch).

    Hand-written because kornia's RandomCrop cuts sample by sample in a Python loop (about 45,000 32-px images/s on
    two CPU cores), which makes it the slowest step of a CIFAR batch pipeline; one indexed copy does the batch.
    """

    def __init__(self, size: int, padding: int = 4, padding_mode: str = "reflect", flip_p: float = 0.0) -> None:
        super().__init__()
        if padding_mode not in ("reflect", "constant"):
            raise ValueError(f"padding_mode {padding_mode!r}: choose 'reflect' or 'constant' (zeros)")
        self.size, self.padding, self.padding_mode, self.flip_p = size, padding, padding_mode, flip_p

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Crop a (B, C, H, W) batch to (B, C, size, size)."""
        batch = images.shape[0]
        padded = _pad(images, self.padding, self.padding_mode)
        span_y, span_x = padded.shape[2] - self.size + 1, padded.shape[3] - self.size + 1
        ys = torch.randint(0, span_y, (batch,), device=images.device)
        xs = torch.randint(0, span_x, (batch,), device=images.device)
        index = torch.arange(batch, device=images.device)
        if self.flip_p:  # a flipped crop is the crop at the mirrored offset of the mirrored image: same one copy
            flip = torch.rand(batch, device=images.device) < self.flip_p
            padded = torch.cat([padded, padded.flip(-1)])
            index = torch.where(flip, index + batch, index)
            xs = torch.where(flip, span_x - 1 - xs, xs)
        # every window of the padded batch as a view (no copy); one indexed copy takes each sample's own window
        windows = padded.unfold(2, self.size, 1).unfold(3, self.size, 1)  # (B, C, span_y, span_x, size, size)
        return windows[index, :, ys, xs]


def _pad(images: torch.Tensor, padding: int, mode: str) -> torch.Tensor:
    if mode == "constant":
        return torch.nn.functional.pad(images, [padding] * 4, mode="constant", value=0)
    if images.dtype == torch.uint8:  # reflect padding has no uint8 kernel: index the reflected rows and columns
        height, width = images.shape[-2:]
        rows = _reflect_index(height, padding, images.device)
        cols = _reflect_index(width, padding, images.device)
        return images.index_select(-2, rows).index_select(-1, cols)
    return torch.nn.functional.pad(images, [padding] * 4, mode="reflect")


def _reflect_index(length: int, padding: int, device: torch.device) -> torch.Tensor:
    index = torch.arange(-padding, length + padding, device=device).abs()
    return torch.where(index >= length, 2 * (length - 1) - index, index)


class BatchHorizontalFlip(torch.nn.Module):
    """Flip each image of a batch left-right with probability `p`, drawn per sample; any dtype, uint8 included
    (kornia's flip works on float, and this runs before the conversion)."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        self.p = p

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Return the batch with a random subset of its images flipped."""
        flip = torch.rand(images.shape[0], device=images.device) < self.p
        return torch.where(flip.view(-1, 1, 1, 1), images.flip(-1), images)


class NormalizeToFloat(torch.nn.Module):
    """uint8 (or [0, 1] float) images to Normalize(mean, std) float32: one conversion and one multiply-add in
    place per pixel, returned in channels_last memory format by default (`channels_last=False`: contiguous NCHW);
    its repr says which."""

    scale: torch.Tensor  # buffers, registered in __init__
    shift: torch.Tensor

    def __init__(self, mean: tuple[float, ...], std: tuple[float, ...], *, channels_last: bool = True) -> None:
        super().__init__()
        mean_t, std_t = torch.tensor(mean).view(1, -1, 1, 1), torch.tensor(std).view(1, -1, 1, 1)
        self.register_buffer("scale", 1 / std_t, persistent=False)
        self.register_buffer("shift", -mean_t / std_t, persistent=False)
        self.channels_last = channels_last
        self.mean, self.std = tuple(mean), tuple(std)

    def extra_repr(self) -> str:
        """The statistics and the output's memory format, as print(module) shows them."""
        layout = "channels_last output" if self.channels_last else "contiguous (NCHW) output"
        return f"mean={self.mean}, std={self.std}, {layout}"

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(images / 255 if uint8) * (1 / std) - mean / std, as float32."""
        scale = self.scale / 255 if images.dtype == torch.uint8 else self.scale
        # one conversion, then the multiply-add in place on it; the layout change comes last, on the finished
        # floats (addcmul into a channels_last output straight from uint8 ran several times slower on a CPU)
        out = images.to(torch.float32, copy=True).mul_(scale).add_(self.shift)
        return out.contiguous(memory_format=torch.channels_last) if self.channels_last else out


def cifar_train_augment(
    *,
    mean: tuple[float, ...] = CIFAR10_MEAN,
    std: tuple[float, ...] = CIFAR10_STD,
    padding: int = 4,
    padding_mode: str = "reflect",
    jitter: float = 0.2,
    jitter_p: float = 0.8,
    grayscale_p: float = 0.2,
    size: int = 32,
    channels_last: bool = True,
) -> torch.nn.Sequential:
    """The course's batch augmentation for 32-px classification, per sample, on the batch's device: random crop
    with `padding_mode` padding and a horizontal flip on uint8 (one copy), then (when `jitter` or `grayscale_p`) kornia's
    ColorJitter with probability `jitter_p` and RandomGrayscale, and Normalize to float with CIFAR-10's mean and std
    unless given others, returned channels_last (`channels_last=False`: contiguous). With `jitter=0` and
    `grayscale_p=0` the conversion is one step (see torchvision_cifar_augment for the torchvision recipe).
    """
    steps: list[torch.nn.Module | None] = [BatchRandomCrop(size, padding, padding_mode, flip_p=0.5)]
    if jitter or grayscale_p:
        steps += [
            ToUnitFloat(),
            K.ColorJitter(jitter, jitter, jitter, 0.0, p=jitter_p) if jitter else None,
            K.RandomGrayscale(p=grayscale_p) if grayscale_p else None,
        ]
    steps.append(NormalizeToFloat(mean, std, channels_last=channels_last))
    return torch.nn.Sequential(*(step for step in steps if step is not None))


def torchvision_cifar_augment(
    *,
    mean: tuple[float, ...] = CIFAR10_MEAN,
    std: tuple[float, ...] = TORCHVISION_RECIPE_STD,
    channels_last: bool = True,
) -> torch.nn.Sequential:
    """The torchvision CIFAR recipe it replaces, per sample on the batch: RandomCrop(32, padding=4) with zero
    padding, RandomHorizontalFlip(), ToTensor(), Normalize((0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)),
    no jitter: crop and flip on uint8, then one conversion to normalised float, channels_last unless
    `channels_last=False`."""
    return cifar_train_augment(
        mean=mean, std=std, padding_mode="constant", jitter=0.0, grayscale_p=0.0, channels_last=channels_last
    )


def normalize_only(
    mean: tuple[float, ...], std: tuple[float, ...], *, channels_last: bool = True
) -> torch.nn.Sequential:
    """Evaluation preprocessing on the device: uint8 -> Normalize(mean, std) float32 with the statistics you give
    (the ones your training normalised with: CIFAR10_MEAN, CIFAR10_STD for cifar_train_augment's), the training
    augmentation's final conversion (NormalizeToFloat), returned channels_last unless `channels_last=False`, so
    evaluation batches reach the model in its layout."""
    return torch.nn.Sequential(NormalizeToFloat(mean, std, channels_last=channels_last))


def denormalize(images: torch.Tensor, *, mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    """Undo Normalize(mean, std) for display, with the statistics it normalised with: images * std + mean, clamped
    to [0, 1]."""
    shape = (1, -1, 1, 1) if images.ndim == 4 else (-1, 1, 1)
    std_t = torch.tensor(std, device=images.device).view(shape)
    mean_t = torch.tensor(mean, device=images.device).view(shape)
    return (images * std_t + mean_t).clamp(0, 1)
