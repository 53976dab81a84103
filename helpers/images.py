"""Reading images safely (decode fully, any mode to 8-bit RGB, the file named when something is wrong) and the one
place where uint8 pixels become float tensors in [0, 1].

Copy alone: needs only numpy, pillow and torch.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

# Modes PIL converts to RGB correctly by itself (alpha is dropped, palette and CMYK are mapped).
_DIRECT_MODES = {"RGB", "RGBA", "RGBX", "RGBa", "L", "LA", "La", "1", "P", "PA", "CMYK", "YCbCr", "LAB", "HSV"}
# 16-bit (and 32-bit integer, as 16-bit PNGs may open) greyscale: PIL's own convert clips at 255 instead of scaling.
_SIXTEEN_BIT_MODES = {"I;16", "I;16L", "I;16B", "I;16N", "I"}


class BadImageError(ValueError):
    """An image file cannot be used: corrupt, truncated, or in a mode that has no faithful RGB form."""


class ImageTooSmallError(BadImageError):
    """An image is smaller than the crop asked of it."""


def _sixteen_bit_to_rgb(image: Image.Image, path: Path) -> Image.Image:
    values = np.asarray(image, dtype=np.int64)
    if values.min() < 0 or values.max() > 65535:
        raise BadImageError(
            f"{path}: mode {image.mode} holds values {values.min()}..{values.max()}, outside 16-bit 0..65535; "
            "convert it to 8-bit RGB yourself"
        )
    eight_bit = ((values * 255 + 32767) // 65535).astype(np.uint8)  # rounds 0..65535 onto 0..255
    return Image.fromarray(np.stack([eight_bit] * 3, axis=-1))


def to_rgb(image: Image.Image, path: str | os.PathLike = "<image>") -> Image.Image:
    """Return `image` as 8-bit RGB (greyscale, palette, RGBA, CMYK and 16-bit handled), or raise BadImageError."""
    path = Path(path)
    if image.mode == "RGB":
        return image
    if image.mode in _SIXTEEN_BIT_MODES:
        return _sixteen_bit_to_rgb(image, path)
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")  # PIL's recommended route for palette images with transparency
    if image.mode in _DIRECT_MODES:
        return image.convert("RGB")
    raise BadImageError(f"{path}: image mode {image.mode!r} has no faithful 8-bit RGB form; convert the file first")


def load_rgb_image(path: str | os.PathLike) -> Image.Image:
    """Decode the whole file at `path` as 8-bit RGB, or raise BadImageError naming the file and the problem."""
    path = Path(path)
    try:
        with Image.open(path) as image:
            image.load()  # decode now, so truncation shows here and not later in a worker
            return to_rgb(image, path)
    except BadImageError:
        raise
    except FileNotFoundError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise BadImageError(
            f"{path}: cannot decode the image ({type(error).__name__}: {error}); the file is corrupt or "
            "truncated: download it again or remove it from the dataset"
        ) from error


def check_crop_fits(size: tuple[int, int], crop: int, path: str | os.PathLike = "<image>") -> None:
    """Raise ImageTooSmallError naming the file when an image of (width, height) `size` cannot give a `crop` square."""
    width, height = size
    if width < crop or height < crop:
        raise ImageTooSmallError(
            f"{path}: image is {width}x{height} pixels, smaller than the {crop}x{crop} crop; "
            "use a smaller crop or remove the image"
        )


def image_census(paths: list[Path] | list[str]) -> Counter:
    """Count (width, height, mode, format) over image files, reading headers only (nothing is decoded)."""
    census: Counter = Counter()
    for path in paths:
        try:
            with Image.open(path) as image:
                census[(image.width, image.height, image.mode, image.format)] += 1
        except (UnidentifiedImageError, OSError) as error:
            raise BadImageError(f"{path}: cannot read the image header ({error})") from error
    return census


def to_unit_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 pixels (0..255) as float32 in [0, 1], on whatever device they are on; float input is returned as is."""
    return images.float().div_(255) if images.dtype == torch.uint8 else images


def to_uint8_tensor(image: Image.Image | np.ndarray) -> torch.Tensor:
    """An RGB image (PIL, or an HWC uint8 array) as a contiguous uint8 (3, H, W) tensor."""
    array = np.array(image, dtype=np.uint8)  # a writable copy: torch warns on read-only buffers
    return torch.from_numpy(array).permute(2, 0, 1).contiguous()


def to_float_tensor(image: Image.Image | np.ndarray) -> torch.Tensor:
    """An RGB image (PIL, or an HWC uint8 array) as a float (3, H, W) tensor in [0, 1]."""
    return to_unit_float(to_uint8_tensor(image))
