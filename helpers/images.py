"""Reading images safely (decode fully, any mode to 8-bit RGB, the file named when something is wrong), the one
place where uint8 pixels become float tensors in [0, 1], and the one way a loader's small host tensors (random draws,
indices, boxes) reach the device without making the host wait.

Example:
    >>> image = Image.new("L", (4, 2), 255)  # greyscale, 4 x 2
    >>> to_rgb(image).mode, to_uint8_tensor(to_rgb(image)).shape
    ('RGB', torch.Size([3, 2, 4]))
    >>> to_unit_float(torch.tensor([0, 51, 255], dtype=torch.uint8))
    tensor([0.0000, 0.2000, 1.0000])

Copy alone.
Needs: numpy, pillow, torch.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

# Modes PIL converts to RGB correctly by itself (alpha is dropped, palette and CMYK are mapped).
_DIRECT_MODES = {"RGB", "RGBA", "RGBX", "RGBa", "L", "LA", "La", "1", "P", "PA", "CMYK", "YCbCr", "LAB", "HSV"}
# 16-bit greyscale, and 32-bit integer greyscale ("I": 16-bit PNG and PPM files may open so): PIL's own convert clips
# at 255 instead of scaling.
_SIXTEEN_BIT_MODES = {"I;16", "I;16L", "I;16B", "I;16N", "I"}
_SIXTEEN_BIT_FORMATS = {"PNG", "PPM"}  # mode "I" from these formats is always 16-bit data
_TIFF_BITS_PER_SAMPLE = 258


class BadImageError(ValueError):
    """An image file cannot be used: corrupt, truncated, or in a mode that has no faithful RGB form."""


class ImageTooSmallError(BadImageError):
    """An image is smaller than the crop asked of it."""


def _holds_sixteen_bit_values(image: Image.Image, values: np.ndarray) -> bool:
    """True when a greyscale integer image is 16-bit data; False when it holds 8-bit values (mode "I", 0..255)."""
    if image.mode != "I" or image.format in _SIXTEEN_BIT_FORMATS:
        return True
    bits = getattr(image, "tag_v2", {}).get(_TIFF_BITS_PER_SAMPLE) if image.format == "TIFF" else None
    depth = max(bits if isinstance(bits, tuple) else (bits,)) if bits else None
    if depth in (8, 16):
        return depth == 16
    return int(values.max(initial=0)) > 255  # a 32-bit container: its values tell


def _sixteen_bit_to_rgb(image: Image.Image, path: Path) -> Image.Image:
    values = np.asarray(image)  # uint16 for the I;16 modes, int32 for mode I: PIL's own width, never int64
    low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
    if low < 0 or high > 65535:
        raise BadImageError(
            f"{path}: mode {image.mode} holds values {low}..{high}, outside 16-bit 0..65535; "
            "convert it to 8-bit RGB yourself"
        )
    if _holds_sixteen_bit_values(image, values):
        wide = values.astype(np.uint32)  # 255 x 65535 fits: in-place arithmetic, no int64 (or intp index) temporaries
        del values  # mode I's int32 copy is as wide as `wide`: never hold both beside the outputs
        wide *= 255
        wide += 32767
        wide //= 65535  # rounds 0..65535 onto 0..255
        eight_bit = wide.astype(np.uint8)
        del wide
    else:
        eight_bit = values.astype(np.uint8)  # 8-bit values in a 32-bit container: kept as they are
    rgb = np.empty((*eight_bit.shape, 3), dtype=np.uint8)
    rgb[...] = eight_bit[..., None]
    return Image.fromarray(rgb)


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


def unreadable_image(path: str | os.PathLike, error: BaseException, doing: str) -> BadImageError:
    """The BadImageError for an image PIL could not `doing` (e.g. "decode the image"), with advice for its kind."""
    path = Path(path)
    if isinstance(error, Image.DecompressionBombError):
        return BadImageError(
            f"{path}: {error} PIL refuses it as a possible decompression bomb; if you trust the file, raise "
            "PIL.Image.MAX_IMAGE_PIXELS before loading, or shrink the image"
        )
    return BadImageError(
        f"{path}: cannot {doing} ({type(error).__name__}: {error}); the file is corrupt or truncated: download it "
        "again or remove it from the dataset"
    )


READ_ERRORS = (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError)
_NOT_REGULAR = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def open_image_file(path: str | os.PathLike):
    """Open `path` for reading if it is a regular file (a link to one is fine), else raise BadImageError naming what
    it is: a FIFO would block PIL forever and /dev/zero would be read until memory runs out.

    The open is non-blocking and checked with fstat (safe_open.py does the same for the rest of the data layer;
    written out here so this module still copies alone).
    """
    path = Path(path)
    fd: int | None = None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        mode = os.fstat(fd).st_mode
    except OSError as error:  # a socket cannot be opened at all (ENXIO): say what it is, as for a FIFO
        if error.errno != errno.ENXIO:
            raise
        mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode) or fd is None:
        if fd is not None:
            os.close(fd)
        what = next((phrase for test, phrase in _NOT_REGULAR if test(mode)), "a special file")
        raise BadImageError(f"{path}: is {what}, not an image file; remove it from the dataset or point to the file")
    return os.fdopen(fd, "rb")


def load_rgb_image(path: str | os.PathLike) -> Image.Image:
    """Decode the whole file at `path` as 8-bit RGB, or raise BadImageError naming the file and the problem."""
    path = Path(path)
    try:
        with open_image_file(path) as f, Image.open(f) as image:
            image.load()  # decode now, so truncation shows here and not later in a worker
            return to_rgb(image, path)
    except (BadImageError, FileNotFoundError):
        raise
    except READ_ERRORS as error:
        raise unreadable_image(path, error, "decode the image") from error


def image_header(path: str | os.PathLike) -> tuple[int, int, str, str | None]:
    """(width, height, mode, format) from an image file's header (nothing decoded), or BadImageError naming it."""
    path = Path(path)
    try:
        with open_image_file(path) as f, Image.open(f) as image:
            return image.width, image.height, image.mode, image.format
    except (BadImageError, FileNotFoundError):
        raise
    except READ_ERRORS as error:
        raise unreadable_image(path, error, "read the image header") from error


def check_crop_fits(size: tuple[int, int], crop: int, *, path: str | os.PathLike = "<image>") -> None:
    """Raise ImageTooSmallError naming the file when an image of (width, height) `size` cannot give a `crop` square."""
    width, height = size
    if width < crop or height < crop:
        raise ImageTooSmallError(
            f"{path}: image is {width}x{height} pixels, smaller than the {crop}x{crop} crop; "
            "use a smaller crop or remove the image"
        )


def image_census(paths: list[Path] | list[str]) -> Counter:
    """Count (width, height, mode, format) over image files, reading headers only (nothing is decoded)."""
    return Counter(image_header(path) for path in paths)


def to_unit_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 pixels (0..255) as float32 in [0, 1], on whatever device they are on; float input is returned as is."""
    return images.float().div_(255) if images.dtype == torch.uint8 else images


def host_to_device(tensor: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """A CPU tensor on `device` without a host wait: on CUDA copied from pinned memory with `non_blocking=True` (a
    copy from pageable memory waits for the work queued before it); elsewhere `.to(device)`."""
    device = torch.device(device)
    if device.type != "cuda" or tensor.device.type != "cpu":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)  # the pinned block is kept until the copy has run


def to_uint8_tensor(image: Image.Image | np.ndarray) -> torch.Tensor:
    """An RGB image (PIL, or an HWC uint8 array) as a contiguous uint8 (3, H, W) tensor."""
    array = np.array(image, dtype=np.uint8)  # a writable copy: torch warns on read-only buffers
    return torch.from_numpy(array).permute(2, 0, 1).contiguous()


def to_float_tensor(image: Image.Image | np.ndarray) -> torch.Tensor:
    """An RGB image (PIL, or an HWC uint8 array) as a float (3, H, W) tensor in [0, 1]."""
    return to_unit_float(to_uint8_tensor(image))
