"""RandomResizedCrop + horizontal flip (+ colour jitter) + Normalize for a whole batch on the device, a different
draw per sample, from images of different sizes (decoded JPEGs as they come) or one equal-size batch.

The crop is hand-written on torchvision's `roi_align` because kornia's RandomResizedCrop takes one (B, C, H, W)
tensor (images of different sizes would have to be padded, and its boxes would then fall in the padding), and it
either crops sample by sample in a Python loop ("slice") or warps bilinearly with no antialias filter ("resample"),
which aliases at the 2-4x reductions a 224-px crop of a photograph needs. `roi_align` with adaptive sampling
averages every source pixel under an output pixel (an area filter) for all boxes in one kernel. Flip and jitter are
kornia's (its ColorJitter reads a few device values on the host per batch: its order and which steps apply).

Example:
    >>> images = [torch.randint(0, 256, (3, h, w), dtype=torch.uint8) for h, w in [(300, 400), (240, 180)]]
    >>> augment = device_train_augment(64, mean=IMAGENET_MEAN, std=IMAGENET_STD)  # any sizes, one crop kernel
    >>> augment(images).shape
    torch.Size([2, 3, 64, 64])

Copy with: images.py (the uint8 to float conversion).
Needs: kornia, numpy, pillow, torch, torchvision; optional: torchcodec (batched decoding where installed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import kornia.augmentation as K
import torch
from torchvision.io import ImageReadMode, decode_jpeg
from torchvision.ops import roi_align

from .images import host_to_device, to_unit_float

try:  # torchvision 0.29 deprecates its image decoders in favour of torchcodec's: use torchcodec where installed
    from torchcodec.decoders import decode_jpeg as torchcodec_decode_jpeg
except (ImportError, RuntimeError, OSError):  # installed but its libraries (FFmpeg, CUDA's NPP) do not load here
    torchcodec_decode_jpeg = None

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
TRIES = 10  # torchvision's RandomResizedCrop tries 10 boxes before it falls back to a centre crop


def random_resized_boxes(
    heights: torch.Tensor,
    widths: torch.Tensor,
    *,
    scale: Sequence[float] = (0.08, 1.0),
    ratio: Sequence[float] = (3 / 4, 4 / 3),
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """torchvision's RandomResizedCrop boxes for a batch, drawn per sample at once: (B, 4) float (x1, y1, x2, y2) in
    pixel-edge coordinates, integer-valued as torchvision's are. Sizes are 1-D tensors on the CPU."""
    count = len(heights)
    h, w = heights.double().view(-1, 1), widths.double().view(-1, 1)
    area = (h * w).expand(count, TRIES)
    target = area * torch.empty(count, TRIES, dtype=torch.float64).uniform_(scale[0], scale[1], generator=generator)
    log_ratio = torch.empty(count, TRIES, dtype=torch.float64).uniform_(
        math.log(ratio[0]), math.log(ratio[1]), generator=generator
    )
    aspect = torch.exp(log_ratio)
    box_w, box_h = torch.sqrt(target * aspect).round(), torch.sqrt(target / aspect).round()
    ok = (box_w > 0) & (box_h > 0) & (box_w <= w) & (box_h <= h)
    first = torch.where(ok.any(1), ok.double().argmax(1), torch.full((count,), -1)).long()
    pick = first.clamp(min=0).view(-1, 1)
    box_w, box_h = box_w.gather(1, pick).view(-1), box_h.gather(1, pick).view(-1)
    # no valid try: torchvision's fallback, the centre crop of the whole image with its ratio clamped
    h, w = h.view(-1), w.view(-1)
    in_ratio = w / h
    fall_w = torch.where(in_ratio < ratio[0], w, torch.where(in_ratio > ratio[1], (h * ratio[1]).round(), w))
    fall_h = torch.where(in_ratio < ratio[0], (w / ratio[0]).round(), h)
    fallback = first < 0
    box_w, box_h = torch.where(fallback, fall_w, box_w), torch.where(fallback, fall_h, box_h)
    u = torch.rand(count, 2, dtype=torch.float64, generator=generator)
    top = torch.where(fallback, torch.floor((h - box_h) / 2), torch.floor(u[:, 0] * (h - box_h + 1)))
    left = torch.where(fallback, torch.floor((w - box_w) / 2), torch.floor(u[:, 1] * (w - box_w + 1)))
    return torch.stack([left, top, left + box_w, top + box_h], 1).float()


def pad_to_batch(images: Sequence[torch.Tensor] | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Images of any sizes, (C, H_i, W_i) each, as one (B, C, H_max, W_max) batch with their heights and widths (CPU
    tensors), padded by repeating each image's last row and column: a bilinear sample at a box's edge then sees the
    edge pixel, as it would at the border of the image alone. An equal-size (B, C, H, W) batch passes through."""
    if isinstance(images, torch.Tensor) and images.ndim == 4:
        count, _, height, width = images.shape
        return images, torch.full((count,), height), torch.full((count,), width)
    heights = torch.tensor([int(image.shape[-2]) for image in images])
    widths = torch.tensor([int(image.shape[-1]) for image in images])
    first = images[0]
    batch = first.new_empty((len(images), first.shape[0], int(heights.max()), int(widths.max())))
    for i, image in enumerate(images):
        height, width = image.shape[-2:]
        batch[i, :, :height, :width] = image
        batch[i, :, height:, :width] = image[:, -1:, :]
        batch[i, :, :, width:] = batch[i, :, :, width - 1 : width]
    return batch, heights, widths


class BatchRandomResizedCrop(torch.nn.Module):
    """RandomResizedCrop(`size`) per sample for a batch (or a list of images of different sizes) in one roi_align:
    float output in [0, 1] (uint8 input is converted), shape (B, C, size, size)."""

    def __init__(
        self,
        size: int = 224,
        *,
        scale: Sequence[float] = (0.08, 1.0),
        ratio: Sequence[float] = (3 / 4, 4 / 3),
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.size, self.scale, self.ratio, self.generator = size, tuple(scale), tuple(ratio), generator

    def forward(self, images: Sequence[torch.Tensor] | torch.Tensor) -> torch.Tensor:
        """Crop and resize every image with its own box."""
        batch, heights, widths = pad_to_batch(images)
        boxes = random_resized_boxes(heights, widths, scale=self.scale, ratio=self.ratio, generator=self.generator)
        return crop_boxes(to_unit_float(batch), host_to_device(boxes, batch.device), self.size)  # no host wait


def crop_boxes(batch: torch.Tensor, boxes: torch.Tensor, size: int) -> torch.Tensor:
    """Each image of a float batch cut to its (x1, y1, x2, y2) box and resized to `size` x `size` by area averaging
    (roi_align, aligned pixel centres, adaptive sampling: ceil(box / size) samples per output pixel and axis). A box
    smaller than `size` is enlarged bilinearly, reading up to half a pixel beyond its edge (torchvision's
    resized_crop repeats the edge pixel instead: they differ only in that rim)."""
    rois = torch.cat([torch.arange(len(boxes), device=boxes.device, dtype=boxes.dtype).view(-1, 1), boxes], 1)
    return roi_align(batch, rois, output_size=(size, size), spatial_scale=1.0, sampling_ratio=0, aligned=True)


class Normalize(torch.nn.Module):
    """(images - mean) / std per channel, with mean and std as buffers that `.to(device)` moves. Hand-written because
    kornia's Normalize keeps them outside its buffers (its documentation says `.to` does not move them): on a GPU
    every batch then copied them from the host's pageable memory, a copy that can make the host wait."""

    mean: torch.Tensor  # buffers, registered in __init__
    std: torch.Tensor

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1), persistent=False)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Normalise a float (B, C, H, W) batch."""
        return (images - self.mean) / self.std


class ToChannelsLast(torch.nn.Module):
    """A batch in channels_last memory format (what convolutions on a GPU and with bf16 on a CPU run fastest on)."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Return the batch in channels_last."""
        return images.contiguous(memory_format=torch.channels_last)


def device_train_augment(
    size: int = 224,
    *,
    mean: Sequence[float],
    std: Sequence[float],
    jitter: float = 0.2,
    generator: torch.Generator | None = None,
) -> torch.nn.Sequential:
    """The CIFAR post's RandomResizedCrop(224) + flip + ColorJitter(0.2, 0.2, 0.2) + Normalize(mean, std), per
    sample, on the batch's device: decoded uint8 images (a list of any sizes, or a batch) in, normalised float out in
    channels_last memory format (the last step, ToChannelsLast). Give the statistics your model expects (ImageNet's
    IMAGENET_MEAN, IMAGENET_STD for ImageNet-trained weights); `jitter=0` leaves the jitter out."""
    steps: list[torch.nn.Module] = [BatchRandomResizedCrop(size, generator=generator), K.RandomHorizontalFlip()]
    if jitter:
        steps.append(K.ColorJitter(jitter, jitter, jitter, 0.0, p=1.0))
    steps += [Normalize(mean, std), ToChannelsLast()]
    return torch.nn.Sequential(*steps)


def jpeg_decoder_name() -> str:
    """Which library decode_jpegs uses here: "torchcodec" where installed, else "torchvision"."""
    return "torchcodec" if torchcodec_decode_jpeg is not None else "torchvision"


def decode_jpegs(datas: list[torch.Tensor], device: torch.device | str = "cpu") -> list[torch.Tensor]:
    """Encoded JPEG files (1-D uint8 CPU tensors) decoded to RGB uint8 (3, H, W) tensors: on CUDA in one batched
    nvJPEG call onto the device, elsewhere one by one with libjpeg-turbo on the CPU (torchcodec where installed,
    else torchvision.io). On CUDA a file nvJPEG cannot decode (a CMYK JPEG) fails the batched call: the batch is
    then decoded file by file, and only such a file on the CPU, its pixels copied to the device."""
    device = torch.device(device)
    if device.type != "cuda":
        return _decode(datas, device)
    try:
        return _decode(datas, device)
    except RuntimeError:  # one file (or more) nvJPEG cannot read: find it, and decode only it on the CPU
        return [_decode_on(data, device) for data in datas]


def _decode(datas: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    if torchcodec_decode_jpeg is not None:
        return list(torchcodec_decode_jpeg(list(datas), mode="RGB", device=device))
    if device.type == "cuda":
        return decode_jpeg(list(datas), mode=ImageReadMode.RGB, device=device)
    return [decode_jpeg(data, mode=ImageReadMode.RGB) for data in datas]


def _decode_on(data: torch.Tensor, device: torch.device) -> torch.Tensor:
    """One file on the GPU, or, where nvJPEG cannot decode it, on the CPU and then copied to the GPU."""
    try:
        return _decode([data], device)[0]
    except RuntimeError:
        return host_to_device(_decode([data], torch.device("cpu"))[0], device)
