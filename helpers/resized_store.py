"""A pre-resized uint8 image store: every image of a folder decoded once, resized to a short side of N pixels, and
kept as raw RGB bytes in one memory-mapped file with an index (offset, height, width, label). Reading a sample is a
slice of the page cache: no decoding, and every process on a machine (DataLoader workers, ranks) shares the same
pages. Built once however many processes ask (atomic.py's build_once), then RandomResizedCrop reads from it.

Each build has an identity, recorded in `meta.json`, at the end of `pixels.u8` and (as a digest of the index) for
`index.npy`; a store is complete only when all three agree and `pixels.u8` holds exactly the bytes `meta.json`
records, so a truncated store is built again. A reader checks the identity when it is made and again when a process
(a DataLoader worker) maps the pixels, so it never serves one build's pixels through another build's index. Every
file is opened as a regular file: a FIFO or a device in the store is named, never read forever.

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     for i, size in enumerate([(400, 300), (200, 320)]):
    ...         Image.new("RGB", size).save(f"{tmp}/{i}.png")
    ...     samples = [(f"{tmp}/0.png", 0), (f"{tmp}/1.png", 1)]  # (path, label), as ImageFolder(root).samples
    ...     store = ResizedStore(build_resized_store(samples, f"{tmp}/store", short_side=64))
    ...     print(store.image(0).shape, store.image(1).shape, StoreCropDataset(store, 32)[1][0].shape)
    (64, 85, 3) (102, 64, 3) torch.Size([3, 32, 32])

Copy with: atomic.py with safe_open.py (the safe build-once, regular files only), images.py (decoding that names a
bad file), jpeg_crop.py (the crop box).
Needs: numpy, pillow, torch, torchvision.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from .atomic import build_once, reserve_file, sources_key
from .images import image_header, load_rgb_image, to_uint8_tensor
from .jpeg_crop import RATIO, SCALE, random_resized_crop_box
from .safe_open import open_regular

PIXELS, INDEX, META = "pixels.u8", "index.npy", "meta.json"
ID_BYTES = 32  # the build's identity (32 hex digits) after the pixels in pixels.u8
META_BYTES = 1 << 20  # meta.json holds a few numbers and the class names: past this it is not one


class ResizedStoreError(FileNotFoundError):
    """A resized store cannot be read as one build: missing, incomplete or damaged, or built again under a reader."""


def resized_shape(width: int, height: int, short_side: int) -> tuple[int, int]:
    """(width, height) with the shorter side `short_side` and the aspect ratio kept (rounded); never enlarged."""
    factor = min(1.0, short_side / min(width, height))
    return max(1, round(width * factor)), max(1, round(height * factor))


def _write(path: Path, data: bytes) -> None:
    with open_regular(path, "wb", exclusive=True, role="a file of the store being built") as f:
        f.write(data)


def _build(samples: list[tuple[str, int]], short_side: int, classes: list[str], key: str, staging: Path) -> None:
    shapes = [resized_shape(*image_header(path)[:2], short_side) for path, _ in samples]
    sizes = np.array([w * h * 3 for w, h in shapes], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    total, build = int(sizes.sum()), uuid.uuid4().hex
    reserve_file(staging / PIXELS, total + ID_BYTES)  # a full disk fails here, not with SIGBUS mid-build
    with open_regular(staging / PIXELS, "r+b", role="a store being built") as f:
        pixels = np.memmap(f, dtype=np.uint8, mode="r+", shape=(total,))
        for (path, _), (w, h), offset in zip(samples, shapes, offsets):
            image = load_rgb_image(path)
            if image.size != (w, h):
                image = image.resize((w, h), Image.Resampling.BILINEAR)  # PIL's bilinear antialiases when reducing
            pixels[offset : offset + w * h * 3] = np.asarray(image, dtype=np.uint8).reshape(-1)
        pixels.flush()
        del pixels
        os.pwrite(f.fileno(), build.encode(), total)
    index = np.stack([offsets, [h for _, h in shapes], [w for w, _ in shapes], [label for _, label in samples]], 1)
    buffer = io.BytesIO()
    np.save(buffer, index.astype(np.int64))
    _write(staging / INDEX, buffer.getvalue())
    meta = {"images": len(samples), "short_side": short_side, "classes": classes, "bytes": total, "build": build}
    meta.update(index=hashlib.blake2b(buffer.getvalue(), digest_size=16).hexdigest(), sources=key)
    _write(staging / META, json.dumps(meta).encode("utf-8"))


def _read(path: Path, limit: int, role: str) -> bytes:
    with open_regular(path, role=role) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path}: more than {limit} bytes; not {role}")
    return data


def _open_build(folder: Path) -> tuple[dict, np.ndarray]:
    """The meta and index of the store in `folder`, checked to be one complete build; else ResizedStoreError."""
    try:
        meta = json.loads(_read(folder / META, META_BYTES, "a resized store's meta.json"))
        index_bytes = _read(folder / INDEX, 64 * int(meta["images"]) + 4096, "a resized store's index")
        index = np.load(io.BytesIO(index_bytes), allow_pickle=False)
        problem = None
        if hashlib.blake2b(index_bytes, digest_size=16).hexdigest() != meta["index"]:
            problem = f"{folder / INDEX} is not the index of the build {folder / META} records"
        elif index.shape != (int(meta["images"]), 4):
            problem = f"{folder / INDEX} has the shape {index.shape}, not ({meta['images']}, 4)"
        else:
            with open_regular(folder / PIXELS, role="a resized store's pixels") as f:
                problem = _pixels_problem(f, folder, meta)
    except (OSError, ValueError, KeyError, TypeError) as error:
        problem = f"{type(error).__name__}: {error}"
    if problem is not None:
        raise ResizedStoreError(
            f"{folder}: not a complete resized store ({problem}); build it with build_resized_store"
        )
    return meta, index


def _pixels_problem(f: IO[bytes], folder: Path, meta: dict) -> str | None:
    """Why the open pixels.u8 `f` is not the whole pixel file of the build `meta` records (None when it is)."""
    size, want = os.fstat(f.fileno()).st_size, int(meta["bytes"]) + ID_BYTES
    if size != want:
        return f"{folder / PIXELS} holds {size} bytes, {want} expected (cut short, or another build's)"
    if os.pread(f.fileno(), ID_BYTES, int(meta["bytes"])) != str(meta["build"]).encode():
        return f"{folder / PIXELS} belongs to another build than {folder / META} records"
    return None


def _is_complete(short_side: int, count: int, key: str) -> object:
    def check(path: Path) -> bool:
        try:
            meta, _ = _open_build(path)
        except ResizedStoreError:
            return False
        return meta.get("short_side") == short_side and meta.get("images") == count and meta.get("sources") == key

    return check


def build_resized_store(
    samples: Sequence[tuple[str, int]],
    dest: str | os.PathLike,
    *,
    short_side: int,
    classes: Sequence[str] = (),
    content: bool = False,
) -> Path:
    """Decode every (path, label) sample once into a store at `dest` (a folder), unless a complete one with the same
    short side, made from the same files, is there already; safe when several processes call it at once. Returns
    `dest`.

    "The same files" means the same paths, labels, sizes and modification times (atomic.sources_key): an edit that
    keeps a file's size and time (`cp -p`, `rsync -t`) is not seen unless `content=True`, which hashes every file's
    bytes on every call. A full disk, a read-only `dest` or a `dest` holding other files (never replaced) is
    atomic.DestinationError naming `dest`."""
    samples = [(str(path), int(label)) for path, label in samples]
    if not samples:
        raise ValueError(f"{dest}: no images to store")
    key = sources_key(samples, content=content)
    build_once(
        dest,
        lambda staging: _build(samples, short_side, list(classes), key, staging),
        is_complete=_is_complete(short_side, len(samples), key),  # type: ignore[arg-type]
        owns=lambda name: name in (PIXELS, INDEX, META),  # a folder of anything else is not replaced
    )
    return Path(dest)


class ResizedStore:
    """A built store, read-only: `image(i)` is an (H, W, 3) uint8 view of the mapped file, `labels` every label.

    The file is mapped lazily in each process (a DataLoader worker maps its own; pickling sends only the path and
    the index), after checking it is still the build the index came from: a store built again under a running
    reader is a ResizedStoreError naming it, never another build's pixels under this index."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.meta, self.index = _open_build(self.path)
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

    def _map(self) -> np.memmap:
        try:
            f = open_regular(self.path / PIXELS, role="a resized store's pixels")
        except FileNotFoundError as error:  # removed, or between the two renames of a rebuild's publish
            raise ResizedStoreError(
                f"{self.path}: {PIXELS} is gone since this reader opened the store (removed, or being built again "
                "right now); build it if need be, then open it again (ResizedStore) and make the dataset and loader "
                "again"
            ) from error
        with f:
            problem = _pixels_problem(f, self.path, self.meta)
            if problem is not None:
                raise ResizedStoreError(
                    f"{self.path}: the store was built again after this reader opened it ({problem}); open it again "
                    "(ResizedStore) and make the dataset and loader again, so that index and pixels are one build"
                )
            return np.memmap(f, dtype=np.uint8, mode="r", shape=(self.nbytes,))  # the mapping outlives the file

    def image(self, i: int) -> np.ndarray:
        """Image `i` as an (H, W, 3) uint8 read-only view (no copy)."""
        if self._pixels is None:
            self._pixels = self._map()
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
