"""Reduced-size JPEG decoding for RandomResizedCrop: draw the crop box from the file's header first, then let the
JPEG decoder produce only as many pixels as that box needs (PIL's `draft`: DCT scaling by 1/2, 1/4 or 1/8), map the
box onto the reduced image and resize it to the output size. A box is decoded reduced only when it is at least twice
the output size on both sides: at 224 px that needs a box of 448 x 448 or more, which a 500x375 photograph never
has (its boxes decode at full size, exactly as PIL does); a 4000x3000 photograph's boxes mostly reduce, at a quarter
of the pixels or less. What this module saves is therefore the photograph's size against the output's: measure it
on your own files (`jpeg_reduction` on the boxes `random_resized_crop_box` draws).

Example:
    >>> buffer = io.BytesIO()
    >>> Image.new("RGB", (1600, 1200), (90, 140, 200)).save(buffer, "JPEG")  # a photograph-sized JPEG
    >>> crop, box = decode_crop(buffer.getvalue(), 224, box=(0, 0, 1200, 1200))  # (top, left, height, width)
    >>> crop.size, jpeg_reduction(box, 224)  # the 1200-px box decoded at 1/4 (300 px), then resized to 224
    ((224, 224), 4)

Copy with: images.py (the RGB conversion and the error that names a bad file).
Needs: numpy, pillow, torch, torchvision.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence
from pathlib import Path

import torch
from PIL import Image
from torch.utils.data import Dataset
from torchvision.transforms import RandomResizedCrop

from .images import READ_ERRORS, BadImageError, open_image_file, to_rgb, to_uint8_tensor, unreadable_image

Box = tuple[int, int, int, int]  # (top, left, height, width), torchvision's order
SCALE = (0.08, 1.0)  # torchvision's RandomResizedCrop defaults
RATIO = (3 / 4, 4 / 3)
JPEG_REDUCTIONS = (8, 4, 2, 1)  # the DCT scalings libjpeg offers, largest first


def random_resized_crop_box(
    width: int, height: int, *, scale: Sequence[float] = SCALE, ratio: Sequence[float] = RATIO
) -> Box:
    """torchvision's RandomResizedCrop box (top, left, height, width) for an image of this size, drawn from torch's
    global RNG (seeded per DataLoader worker), without any pixels: only the size is read."""
    # get_params reads only the image's shape; a stride-0 view of one element stands in for the pixels
    stand_in = torch.empty(1).expand(3, height, width)
    top, left, box_h, box_w = RandomResizedCrop.get_params(stand_in, list(scale), list(ratio))
    return int(top), int(left), int(box_h), int(box_w)


def jpeg_reduction(box: Box, size: int) -> int:
    """The largest DCT reduction (8, 4, 2 or 1) that still leaves the box at least `size` pixels on both sides."""
    _, _, box_h, box_w = box
    return next(f for f in JPEG_REDUCTIONS if f == 1 or min(box_h, box_w) / f >= size)


def map_box(box: Box, full: tuple[int, int], reduced: tuple[int, int]) -> tuple[float, float, float, float]:
    """A (top, left, height, width) box of the full (width, height) image as PIL's (left, upper, right, lower) box in
    the reduced image's pixel coordinates (floats: PIL's resize samples a fractional box exactly). A JPEG reduced by
    f is ceil(full / f) pixels wide, its pixel i covering full pixels [i f, (i + 1) f): the scale is 1 / f exactly."""
    top, left, box_h, box_w = box
    factor = 2 ** round(math.log2(full[0] / reduced[0])) if reduced != full else 1
    return left / factor, top / factor, (left + box_w) / factor, (top + box_h) / factor


def decode_crop(
    source: str | os.PathLike | bytes,
    size: int,
    *,
    scale: Sequence[float] = SCALE,
    ratio: Sequence[float] = RATIO,
    box: Box | None = None,
    reduce: bool = True,
) -> tuple[Image.Image, Box]:
    """Decode a RandomResizedCrop of `size` x `size` from a file path or the file's bytes, as 8-bit RGB, and the box
    drawn (in full-image coordinates). With `reduce`, a JPEG is decoded at the smallest DCT scale the box allows;
    `reduce=False` is the plain path (decode everything, then crop) for comparison. Other formats decode in full.
    A path is opened as a regular file only (images.open_image_file): a FIFO or device is a BadImageError naming it."""
    name = Path(source) if not isinstance(source, bytes) else Path("<bytes>")
    try:
        opened = io.BytesIO(source) if isinstance(source, bytes) else open_image_file(source)  # a FIFO is named
        with opened, Image.open(opened) as image:
            full = image.size
            box = box or random_resized_crop_box(*full, scale=scale, ratio=ratio)
            factor = jpeg_reduction(box, size) if reduce else 1
            if factor > 1 and image.format == "JPEG":
                image.draft("RGB", (full[0] // factor, full[1] // factor))  # PIL picks scale = floor(full / asked)
            image.load()
            rgb = to_rgb(image, name)
            crop = rgb.resize((size, size), Image.Resampling.BILINEAR, box=map_box(box, full, rgb.size))
            return crop, box
    except (BadImageError, FileNotFoundError):
        raise
    except READ_ERRORS as error:  # a bomb gets its own advice (raise MAX_IMAGE_PIXELS), a damaged file its own
        raise unreadable_image(name, error, "decode the image") from error


class ReducedCropDataset(Dataset):
    """(path, label) samples (e.g. ImageFolder(root).samples) as RandomResizedCrop(`size`) + horizontal flip, each
    decoded at reduced size where its box allows (see the module's docstring): a uint8 (3, size, size) tensor and
    the label. Colour jitter and normalisation are left to the batch on the device (see device_crop.py), where they
    are one kernel per batch. Its repr says what it yields."""

    def __init__(
        self,
        samples: Sequence[tuple[str, int]],
        size: int = 224,
        *,
        scale: Sequence[float] = SCALE,
        ratio: Sequence[float] = RATIO,
        flip: bool = True,
        reduce: bool = True,
    ) -> None:
        self.samples, self.size, self.scale, self.ratio = list(samples), size, scale, ratio
        self.flip, self.reduce = flip, reduce

    def __repr__(self) -> str:
        decode = "JPEGs decoded at reduced size where the box allows" if self.reduce else "decoded at full size"
        flip = ", a random horizontal flip" if self.flip else ", no flip"
        return (
            f"ReducedCropDataset: {len(self)} samples, uint8 (3, {self.size}, {self.size}) RandomResizedCrop "
            f"(scale {tuple(self.scale)}, ratio {tuple(round(r, 3) for r in self.ratio)}){flip}, {decode}; "
            "not normalised"
        )

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        crop, _ = decode_crop(path, self.size, scale=self.scale, ratio=self.ratio, reduce=self.reduce)
        pixels = to_uint8_tensor(crop)
        if self.flip and torch.rand(()) < 0.5:
            pixels = pixels.flip(-1)
        return pixels, label
