"""A pre-resized uint8 image store: every image of a folder decoded once, resized to a short side of N pixels, and
kept as raw RGB bytes in one memory-mapped file with an index (offset, height, width, label). Reading a sample is a
slice of the page cache: no decoding, and every process on a machine (DataLoader workers, ranks) shares the same
pages. Built once however many processes ask (atomic.py's build_once), then RandomResizedCrop reads from it.

Copy with: atomic.py with safe_open.py (the safe build-once), images.py (decoding that names a bad file), jpeg_crop.py
(the crop box).
Needs: numpy, pillow, torch, torchvision.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from .atomic import build_once, reserve_file, sources_key
from .images import image_header, load_rgb_image, to_uint8_tensor
from .jpeg_crop import RATIO, SCALE, random_resized_crop_box

PIXELS, INDEX, META = "pixels.u8", "index.npy", "meta.json"


def resized_shape(width: int, height: int, short_side: int) -> tuple[int, int]:
    """(width, height) with the shorter side `short_side` and the aspect ratio kept (rounded); never enlarged."""
    factor = min(1.0, short_side / min(width, height))
    return max(1, round(width * factor)), max(1, round(height * factor))


def _build(samples: list[tuple[str, int]], short_side: int, classes: list[str], key: str, staging: Path) -> None:
    shapes = [resized_shape(*image_header(path)[:2], short_side) for path, _ in samples]
    sizes = np.array([w * h * 3 for w, h in shapes], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    reserve_file(staging / PIXELS, int(sizes.sum()))  # a full disk fails here, not with SIGBUS mid-build
    pixels = np.memmap(staging / PIXELS, dtype=np.uint8, mode="r+", shape=(int(sizes.sum()),))
    for (path, _), (w, h), offset in zip(samples, shapes, offsets):
        image = load_rgb_image(path)
        if image.size != (w, h):
            image = image.resize((w, h), Image.Resampling.BILINEAR)  # PIL's bilinear antialiases when reducing
        pixels[offset : offset + w * h * 3] = np.asarray(image, dtype=np.uint8).reshape(-1)
    pixels.flush()
    del pixels
    index = np.stack([offsets, [h for _, h in shapes], [w for w, _ in shapes], [label for _, label in samples]], 1)
    np.save(staging / INDEX, index.astype(np.int64))
    meta = {"images": len(samples), "short_side": short_side, "classes": classes, "bytes": int(sizes.sum())}
    meta["sources"] = key  # what it was built from: a changed source means a new build
    (staging / META).write_text(json.dumps(meta), encoding="utf-8")


def _is_complete(short_side: int, count: int, key: str) -> object:
    def check(path: Path) -> bool:
        try:
            meta = json.loads((path / META).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        same = meta.get("short_side") == short_side and meta.get("images") == count and meta.get("sources") == key
        return same and (path / INDEX).is_file()

    return check


def build_resized_store(
    samples: Sequence[tuple[str, int]], dest: str | os.PathLike, *, short_side: int, classes: Sequence[str] = ()
) -> Path:
    """Decode every (path, label) sample once into a store at `dest` (a folder), unless a complete one with the same
    short side, made from the same files (paths, labels, sizes and modification times), is there already; safe when
    several processes call it at once. Returns `dest`."""
    samples = [(str(path), int(label)) for path, label in samples]
    if not samples:
        raise ValueError(f"{dest}: no images to store")
    key = sources_key(samples)
    build_once(
        dest,
        lambda staging: _build(samples, short_side, list(classes), key, staging),
        is_complete=_is_complete(short_side, len(samples), key),  # type: ignore[arg-type]
    )
    return Path(dest)


class ResizedStore:
    """A built store, read-only: `image(i)` is an (H, W, 3) uint8 view of the mapped file, `labels` every label.

    The file is mapped lazily in each process (a DataLoader worker maps its own; pickling sends only the path)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        try:
            self.meta = json.loads((self.path / META).read_text(encoding="utf-8"))
            self.index = np.load(self.path / INDEX, allow_pickle=False)
        except (OSError, ValueError) as error:
            raise FileNotFoundError(
                f"{self.path}: not a complete resized store ({error}); build it with build_resized_store"
            ) from error
        self.labels = self.index[:, 3].copy()
        self._pixels: np.memmap | None = None

    def __len__(self) -> int:
        return len(self.index)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_pixels": None}

    @property
    def nbytes(self) -> int:
        """Bytes of pixels the store holds."""
        return int(self.meta["bytes"])

    def image(self, i: int) -> np.ndarray:
        """Image `i` as an (H, W, 3) uint8 read-only view (no copy)."""
        if self._pixels is None:
            self._pixels = np.memmap(self.path / PIXELS, dtype=np.uint8, mode="r", shape=(self.nbytes,))
        offset, height, width, _ = (int(v) for v in self.index[i])
        return self._pixels[offset : offset + height * width * 3].reshape(height, width, 3)


class StoreCropDataset(Dataset):
    """RandomResizedCrop(`size`) + horizontal flip from a ResizedStore: a uint8 (3, size, size) tensor and the label
    (jitter and normalisation are left to the batch on the device, as in jpeg_crop.ReducedCropDataset). Its repr
    says what it yields, and from which store."""

    def __init__(
        self,
        store: ResizedStore,
        size: int = 224,
        *,
        scale: Sequence[float] = SCALE,
        ratio: Sequence[float] = RATIO,
        flip: bool = True,
    ) -> None:
        self.store, self.size, self.scale, self.ratio, self.flip = store, size, scale, ratio, flip

    def __repr__(self) -> str:
        flip = ", a random horizontal flip" if self.flip else ", no flip"
        short = self.store.meta.get("short_side")
        stored = f"images stored with the short side at most {short} px" if short else "the store's images"
        return (
            f"StoreCropDataset: {len(self)} samples, uint8 (3, {self.size}, {self.size}) RandomResizedCrop "
            f"(scale {tuple(self.scale)}, ratio {tuple(round(r, 3) for r in self.ratio)}){flip}, from {stored} "
            f"({self.store.path}); not normalised"
        )

    def __len__(self) -> int:
        return len(self.store)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        pixels = self.store.image(index)
        top, left, box_h, box_w = random_resized_crop_box(
            pixels.shape[1], pixels.shape[0], scale=self.scale, ratio=self.ratio
        )
        crop = Image.fromarray(pixels[top : top + box_h, left : left + box_w])
        out = to_uint8_tensor(crop.resize((self.size, self.size), Image.Resampling.BILINEAR))
        if self.flip and torch.rand(()) < 0.5:
            out = out.flip(-1)
        return out, int(self.store.labels[index])
