"""Offline stand-ins: real photographs shipped in scikit-image's wheel, written in BSDS300 and CIFAR-10 formats."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image
from skimage import data as skdata

from ..atomic import file_lock, staged

STANDIN_MARKER = "STANDIN.txt"
STANDIN_VERSION = "1"

# Photographs in scikit-image's wheel, loaded without a network. Test photos are held out from training entirely.
SR_TRAIN_PHOTOS = (
    "astronaut", "hubble_deep_field", "immunohistochemistry", "retina",
    "motorcycle_left", "motorcycle_right", "camera", "brick", "gravel",
)  # fmt: skip
SR_TEST_PHOTOS = ("chelsea", "coffee", "rocket")
# One class per photograph; training crops come from the left 3/4 of each photo, test crops from the right 1/4.
CIFAR_STANDIN_CLASSES = (
    "astronaut", "chelsea", "coffee", "hubble_deep_field", "immunohistochemistry",
    "rocket", "retina", "motorcycle_left", "camera", "brick",
)  # fmt: skip
BSDS_SIZE = (481, 321)  # width, height of a landscape BSDS300 image (portrait images are 321x481)


def skimage_photo(name: str) -> np.ndarray:
    """Return a photograph from scikit-image's wheel as an (H, W, 3) uint8 array (greyscale photos repeated to RGB)."""
    if name in ("motorcycle_left", "motorcycle_right"):
        left, right, _ = skdata.stereo_motorcycle()
        image = left if name == "motorcycle_left" else right
    else:
        image = getattr(skdata, name)()
    image = np.asarray(image)
    if image.ndim == 2:
        image = np.stack([image] * 3, axis=-1)
    return np.ascontiguousarray(image[..., :3].astype(np.uint8))


def _windows(height: int, width: int, win_h: int, win_w: int) -> list[tuple[int, int]]:
    """Top-left corners of a grid of non-overlapping windows spread evenly over the image."""
    rows, cols = height // win_h, width // win_w
    ys = np.linspace(0, height - win_h, rows).round().astype(int) if rows else []
    xs = np.linspace(0, width - win_w, cols).round().astype(int) if cols else []
    return [(int(y), int(x)) for y in ys for x in xs]


def _bsds_tiles(photo: np.ndarray) -> list[np.ndarray]:
    """Cut a photo into BSDS-sized tiles, landscape where it fits, else portrait, else the whole photo."""
    height, width = photo.shape[:2]
    w, h = BSDS_SIZE
    for win_h, win_w in ((h, w), (w, h)):
        corners = _windows(height, width, win_h, win_w)
        if corners:
            return [photo[y : y + win_h, x : x + win_w] for y, x in corners]
    return [photo]  # smaller than a BSDS image (chelsea is 451x300): kept whole, as real pixels


def _write_atomically(dest: Path, fill: Callable[[Path], None]) -> Path:
    """Build a stand-in folder privately with `fill(staging)`, then publish it in one rename, one writer at a time."""
    with file_lock(dest):
        if standin_is_current(dest):  # another process finished it while this one waited
            return dest
        with staged(dest, folder=True) as staging:
            fill(staging)
            (staging / STANDIN_MARKER).write_text(
                f"stand-in version {STANDIN_VERSION}\nOffline stand-in made from scikit-image's photographs; "
                "numbers from it are not BSD100 or CIFAR-10 results.\n"
            )
    return dest


def standin_is_current(folder: Path) -> bool:
    """True when `folder` holds a complete stand-in of the current version."""
    marker = folder / STANDIN_MARKER
    return marker.is_file() and marker.read_text().startswith(f"stand-in version {STANDIN_VERSION}\n")


def write_sr_standin(dest: str | os.PathLike) -> Path:
    """Write a BSDS300-layout stand-in (images/train, images/test JPEGs, iids files) from scikit-image photos."""
    dest = Path(dest)

    def fill(staging: Path) -> None:
        for split, photos in (("train", SR_TRAIN_PHOTOS), ("test", SR_TEST_PHOTOS)):
            folder = staging / "images" / split
            folder.mkdir(parents=True)
            ids = []
            for name in photos:
                for index, tile in enumerate(_bsds_tiles(skimage_photo(name))):
                    image_id = f"{name}_{index}"
                    Image.fromarray(tile).save(folder / f"{image_id}.jpg", quality=95)
                    ids.append(image_id)
            (staging / f"iids_{split}.txt").write_text("\n".join(ids) + "\n")

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


def _dump_batch(path: Path, images: np.ndarray, labels: np.ndarray, batch_label: str) -> None:
    entry = {
        "batch_label": batch_label,
        "labels": [int(v) for v in labels],
        "data": images.reshape(len(images), -1),  # (N, 3072): 1024 red, then green, then blue, row-major
        "filenames": [f"standin_{batch_label.replace(' ', '_')}_{i:05d}.png" for i in range(len(images))],
    }
    with open(path, "wb") as f:
        pickle.dump(entry, f, protocol=2)


def write_cifar10_standin(
    dest: str | os.PathLike, train_per_class: int = 500, test_per_class: int = 100, seed: int = 0
) -> Path:
    """Write a 10-class stand-in in the CIFAR-10 python format (`cifar-10-batches-py`) from real photo crops."""
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
        for batch, (xs, ys) in enumerate(zip(np.array_split(x, 5), np.array_split(y, 5)), start=1):
            _dump_batch(staging / f"data_batch_{batch}", xs, ys, f"training batch {batch} of 5")
        _dump_batch(staging / "test_batch", np.concatenate(test_x), np.concatenate(test_y), "testing batch 1 of 1")
        meta = {"num_cases_per_batch": len(x) // 5, "label_names": list(CIFAR_STANDIN_CLASSES), "num_vis": 3072}
        with open(staging / "batches.meta", "wb") as f:
            pickle.dump(meta, f, protocol=2)

    return _write_atomically(dest, fill)
