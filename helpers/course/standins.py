"""Offline stand-ins: real photographs shipped in scikit-image's wheel, written in BSDS300 and CIFAR-10 formats."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from ..atomic import build_once
from ..cifar import (
    CIFAR10_META,
    CIFAR10_TEST_BATCHES,
    CIFAR10_TRAIN_BATCHES,
    write_cifar10_batch,
    write_cifar10_class_names,
)

STANDIN_MARKER = "STANDIN.txt"
STANDIN_VERSION = "2"  # 2: CIFAR-10 binary format; 10 held-out SR test images

# Photographs in scikit-image's wheel, loaded without a network. No pixel of a test image is in a training image:
# these photos are used whole for training,
SR_TRAIN_PHOTOS = (
    "astronaut",
    "immunohistochemistry",
    "camera",
    "brick",
    "gravel",
    "grass",
    "moon",
    "motorcycle_left",
    "motorcycle_right",
)
# these are cut in two: tiles from the top half train, tiles from the bottom half test,
SR_SPLIT_PHOTOS = ("hubble_deep_field", "retina", "cell")
# and these are held out whole for testing.
SR_TEST_PHOTOS = ("chelsea", "coffee", "rocket")
# One class per photograph; training crops come from the left 3/4 of each photo, test crops from the right 1/4.
CIFAR_STANDIN_CLASSES = (
    "astronaut",
    "chelsea",
    "coffee",
    "hubble_deep_field",
    "immunohistochemistry",
    "rocket",
    "retina",
    "motorcycle_left",
    "camera",
    "brick",
)
BSDS_SIZE = (481, 321)  # width, height of a landscape BSDS300 image (portrait images are 321x481)


# The file in scikit-image's wheel (skimage/data/) of each photograph the stand-ins use, by skimage.data's name.
# They are read with PIL: skimage.data's own loaders go through skimage.io, which imports SciPy (35 MiB), and the GPU
# check's wheelhouse must fit a 64 MiB carry (tests/course/test_standins.py checks the pixels match skimage.data's).
PHOTO_FILES = {
    **{name: f"{name}.png" for name in ("astronaut", "camera", "brick", "gravel", "grass", "moon", "cell")},
    **{name: f"{name}.png" for name in ("chelsea", "coffee", "motorcycle_left", "motorcycle_right")},
    **{name: f"{name}.jpg" for name in ("hubble_deep_field", "retina", "rocket")},
    "immunohistochemistry": "ihc.png",
}


def skimage_photo(name: str) -> np.ndarray:
    """Return a photograph from scikit-image's wheel as an (H, W, 3) uint8 array (greyscale photos repeated to RGB)."""
    if name not in PHOTO_FILES:
        raise ValueError(f"no stand-in photograph {name!r}: choose one of {', '.join(sorted(PHOTO_FILES))}")
    spec = importlib.util.find_spec("skimage")  # its folder, without importing skimage (and SciPy with it)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the stand-in photographs come from scikit-image's wheel: pip install scikit-image")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / PHOTO_FILES[name]
    with Image.open(path) as photo:
        image = np.asarray(photo.convert("RGB") if photo.mode not in ("L", "RGB") else photo)
    if image.ndim == 2:
        image = np.stack([image] * 3, axis=-1)
    return np.ascontiguousarray(image[..., :3].astype(np.uint8))


@dataclass(frozen=True)
class StandinTile:
    """One stand-in SR image: the window (y, x, height, width) of photograph `photo` it was cut from, and its split."""

    split: str
    photo: str
    y: int
    x: int
    height: int
    width: int

    @property
    def image_id(self) -> str:
        """The image's name in the BSDS300 layout (its file is `images/<split>/<image_id>.jpg`)."""
        return f"{self.photo}_y{self.y}_x{self.x}"


def _windows(height: int, width: int, win_h: int, win_w: int) -> list[tuple[int, int]]:
    """Top-left corners of a grid of non-overlapping windows spread evenly over the image."""
    rows, cols = height // win_h, width // win_w
    ys = np.linspace(0, height - win_h, rows).round().astype(int) if rows else []
    xs = np.linspace(0, width - win_w, cols).round().astype(int) if cols else []
    return [(int(y), int(x)) for y in ys for x in xs]


def _bsds_tiles(split: str, photo: str, top: int, height: int, width: int) -> list[StandinTile]:
    """BSDS-sized tiles of rows top..top+height of a photo: landscape where they fit, else portrait, else it whole."""
    w, h = BSDS_SIZE
    for win_h, win_w in ((h, w), (w, h)):
        corners = _windows(height, width, win_h, win_w)
        if corners:
            return [StandinTile(split, photo, top + y, x, win_h, win_w) for y, x in corners]
    return [StandinTile(split, photo, top, 0, height, width)]  # smaller than a BSDS image (chelsea is 451x300)


def photo_tiles(photo: str, height: int, width: int) -> list[StandinTile]:
    """The stand-in tiles cut from photograph `photo` of `height` x `width` pixels, with their splits."""
    if photo in SR_SPLIT_PHOTOS:
        half = height // 2
        return _bsds_tiles("train", photo, 0, half, width) + _bsds_tiles("test", photo, half, height - half, width)
    split = "test" if photo in SR_TEST_PHOTOS else "train"
    return _bsds_tiles(split, photo, 0, height, width)


def sr_standin_tiles() -> list[StandinTile]:
    """Every tile of the SR stand-in: where in which photograph it comes from, and whether it trains or tests."""
    tiles = []
    for photo in (*SR_TRAIN_PHOTOS, *SR_SPLIT_PHOTOS, *SR_TEST_PHOTOS):
        tiles += photo_tiles(photo, *skimage_photo(photo).shape[:2])
    return tiles


def _write_atomically(dest: Path, fill: Callable[[Path], None]) -> Path:
    """Build a stand-in folder privately with `fill(staging)`, then publish it in one rename, one writer at a time."""

    def build(staging: Path) -> None:
        fill(staging)
        (staging / STANDIN_MARKER).write_text(
            f"stand-in version {STANDIN_VERSION}\nOffline stand-in made from scikit-image's photographs; "
            "numbers from it are not BSD100 or CIFAR-10 results.\n"
        )

    build_once(dest, build, is_complete=standin_is_current)  # another process may have finished it meanwhile
    return dest


def standin_is_current(folder: Path) -> bool:
    """True when `folder` holds a complete stand-in of the current version."""
    marker = folder / STANDIN_MARKER
    return marker.is_file() and marker.read_text().startswith(f"stand-in version {STANDIN_VERSION}\n")


def write_sr_standin(dest: str | os.PathLike) -> Path:
    """Write a BSDS300-layout stand-in (images/train, images/test JPEGs, iids files) from scikit-image photos."""
    dest = Path(dest)

    def fill(staging: Path) -> None:
        ids: dict[str, list[str]] = {"train": [], "test": []}
        for split in ids:
            (staging / "images" / split).mkdir(parents=True)
        for photo in (*SR_TRAIN_PHOTOS, *SR_SPLIT_PHOTOS, *SR_TEST_PHOTOS):
            pixels = skimage_photo(photo)
            for tile in photo_tiles(photo, *pixels.shape[:2]):
                window = pixels[tile.y : tile.y + tile.height, tile.x : tile.x + tile.width]
                Image.fromarray(window).save(staging / "images" / tile.split / f"{tile.image_id}.jpg", quality=95)
                ids[tile.split].append(tile.image_id)
        for split, names in ids.items():
            (staging / f"iids_{split}.txt").write_text("\n".join(names) + "\n")

    return _write_atomically(dest, fill)


def _class_crops(photo: np.ndarray, count: int, rng: np.random.Generator, side: int = 32) -> np.ndarray:
    """`count` random square crops of 1-3x `side` pixels from `photo`, resized to side x side, as (count, 3, side, side)."""
    height, width = photo.shape[:2]
    out = np.empty((count, 3, side, side), dtype=np.uint8)
    source = Image.fromarray(photo)
    for i in range(count):
        size = int(rng.integers(side, min(3 * side, height, width) + 1))
        y = int(rng.integers(0, height - size + 1))
        x = int(rng.integers(0, width - size + 1))
        crop = source.crop((x, y, x + size, y + size)).resize((side, side), Image.Resampling.BICUBIC, reducing_gap=None)
        if rng.random() < 0.5:
            crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        out[i] = np.asarray(crop).transpose(2, 0, 1)
    return out


def write_cifar10_standin(
    dest: str | os.PathLike, train_per_class: int = 500, test_per_class: int = 100, seed: int = 0
) -> Path:
    """Write a 10-class stand-in in the CIFAR-10 binary format (`cifar-10-batches-bin`) from real photo crops."""
    dest = Path(dest)
    rng = np.random.default_rng(seed)

    def fill(staging: Path) -> None:
        train_x, train_y, test_x, test_y = [], [], [], []
        for label, name in enumerate(CIFAR_STANDIN_CLASSES):
            photo = skimage_photo(name)
            split = photo.shape[1] * 3 // 4  # held-out test region: the right quarter of the photo
            train_x.append(_class_crops(photo[:, :split], train_per_class, rng))
            test_x.append(_class_crops(photo[:, split:], test_per_class, rng))
            train_y.append(np.full(train_per_class, label))
            test_y.append(np.full(test_per_class, label))
        x, y = np.concatenate(train_x), np.concatenate(train_y)
        order = rng.permutation(len(x))
        x, y = x[order], y[order]
        for name, xs, ys in zip(CIFAR10_TRAIN_BATCHES, np.array_split(x, 5), np.array_split(y, 5)):
            write_cifar10_batch(staging / name, xs, ys)
        write_cifar10_batch(staging / CIFAR10_TEST_BATCHES[0], np.concatenate(test_x), np.concatenate(test_y))
        write_cifar10_class_names(staging / CIFAR10_META, list(CIFAR_STANDIN_CLASSES))

    return _write_atomically(dest, fill)


def held_out_whole(names: Sequence[str]) -> list[int]:
    """Indices of the SR stand-in's test images that are photographs held out whole (SR_TEST_PHOTOS), as opposed to
    tiles of photographs whose other half is in the training set; test images named otherwise are not counted."""
    return [i for i, name in enumerate(names) if name.rsplit("_y", 1)[0] in SR_TEST_PHOTOS]
