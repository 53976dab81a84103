"""A decoded uint8 cache for super-resolution (images decoded and LR made once, in memory or in memory-mapped files
workers and ranks share) and two loaders of paired crops: gathered on the CPU, or cut (LR made too) on the device.

Example:
    >>> import tempfile, PIL.Image
    >>> with tempfile.TemporaryDirectory() as tmp:  # decoded once, in memory (or memory-mapped files: cache_dir=)
    ...     PIL.Image.new("RGB", (64, 48)).save(f"{tmp}/0.png")
    ...     [x.shape for x in next(iter(CachedCropLoader(DecodedSRCache(tmp, scale=2), batch_size=4, hr_crop=32)))]
    [torch.Size([4, 3, 16, 16]), torch.Size([4, 3, 32, 32])]

Copy with: sr_data.py, images.py, resize.py (decoding, geometry, LR), atomic.py (safe concurrent on-disk builds),
safe_open.py (regular files only) and prefetch.py (the background producer thread).
Needs: numpy, pillow, torch; optional: kornia (sr_data.PairedSRAugment's colour jitter).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from .atomic import build_once, content_digest, reserve_file
from .images import ImageTooSmallError, host_to_device, image_header, load_rgb_image, to_uint8_tensor, to_unit_float
from .prefetch import BackgroundPrefetcher
from .safe_open import check_regular, open_regular, read_regular_bytes
from .sr_data import (
    SCALES,
    bicubic_downscale,
    check_options,
    check_sr_geometry,
    describe_sr_batches,
    epoch_batches,
    list_images,
    make_lr,
    mod_crop,
    paired_dihedral,
    rgb_to_luma,
)

PIXEL_BYTES = 4  # the decoded cache stores RGBX: R, G, B and one padding byte


def _fingerprint(paths: Sequence[Path], scale: int, shapes: Sequence[tuple[int, int]]) -> str:
    """The cache's key: its layout version, scale, every source's path, bytes and (mod-cropped) shape."""
    digest = hashlib.blake2b(f"decoded-cache v4 (HW RGBX) x{scale}".encode(), digest_size=16)
    for path, shape in zip(paths, shapes, strict=True):
        digest.update(f"{path.resolve()}\0{shape[0]}x{shape[1]}\0".encode() + bytes.fromhex(content_digest(path)))
    return digest.hexdigest()


class DecodedSRCache:
    """Every HR image decoded once and its LR made once, in two contiguous uint8 stores (memory or memory-mapped).

    Images are stored height x width x RGBX (a padding byte per pixel): each crop row is one contiguous run of bytes,
    and each pixel one 32-bit word, which makes flips and rotations cheap; `sample` takes aligned crops by tensor
    indexing. With `cache_dir`, the stores are files built once (space reserved first) by one of the processes sharing
    them, rebuilt when a source changes or a file does not match its metadata (`rebuild_reason`).
    """

    def __init__(
        self,
        folder_or_paths: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        scale: int = 4,
        cache_dir: str | os.PathLike | None = None,
    ) -> None:
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, not {scale}")
        self.scale = scale
        self.paths = list_images(folder_or_paths)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.cache_folder: Path | None = None  # cache_dir/x{scale}-{fingerprint}: the stores of these images only
        self.rebuilt = False
        self.rebuild_reason: str | None = None
        self._checked_crops: set[int] = set()
        if self.cache_dir is None:
            self._build_in_memory()
        else:
            self._open_or_build_on_disk(self.cache_dir)

    # building
    def _decode_all(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for path in self.paths:
            hr = to_uint8_tensor(mod_crop(load_rgb_image(path), self.scale))
            yield hr, bicubic_downscale(hr, self.scale)  # uint8 in, uint8 out, rounded as MATLAB rounds

    def _layout(self, shapes: list[tuple[int, int]]) -> None:
        s = self.scale
        self.shapes = torch.tensor(shapes, dtype=torch.int64)  # (N, 2): HR height, width
        hr_sizes = PIXEL_BYTES * self.shapes[:, 0] * self.shapes[:, 1]
        lr_sizes = PIXEL_BYTES * (self.shapes[:, 0] // s) * (self.shapes[:, 1] // s)
        self.hr_offsets = torch.cumsum(hr_sizes, 0) - hr_sizes
        self.lr_offsets = torch.cumsum(lr_sizes, 0) - lr_sizes
        self.hr_total, self.lr_total = int(hr_sizes.sum()), int(lr_sizes.sum())
        self._shape_list = self.shapes.tolist()  # plain lists: per-batch work should not go through tensor indexing
        self._hr_word_offsets = (self.hr_offsets // PIXEL_BYTES).tolist()
        self._lr_word_offsets = (self.lr_offsets // PIXEL_BYTES).tolist()

    def _shapes(self) -> list[tuple[int, int]]:
        sizes = [image_header(path)[:2] for path in self.paths]  # (width, height), the file named when unreadable
        for path, (width, height) in zip(self.paths, sizes):
            if width < self.scale or height < self.scale:
                raise ImageTooSmallError(
                    f"{path}: image is {width}x{height} pixels, smaller than the x{self.scale} scale, so it has no "
                    "low-resolution pixel; remove it from the dataset"
                )
        return [(height - height % self.scale, width - width % self.scale) for width, height in sizes]

    def _fill(self, hr_store: torch.Tensor, lr_store: torch.Tensor) -> None:
        for index, (hr, lr) in enumerate(self._decode_all()):
            h0, l0 = int(self.hr_offsets[index]), int(self.lr_offsets[index])
            if tuple(hr.shape[1:]) != tuple(self.shapes[index].tolist()):
                raise ValueError(f"{self.paths[index]}: decoded size {tuple(hr.shape[1:])} differs from its header")
            for store, start, image in ((hr_store, h0, hr), (lr_store, l0, lr)):
                pixels = store[start : start + PIXEL_BYTES * image[0].numel()].view(-1, PIXEL_BYTES)
                pixels[:, :3] = image.permute(1, 2, 0).reshape(-1, 3)  # H x W x RGBX
                pixels[:, 3] = 0

    def _build_in_memory(self) -> None:
        self._layout(self._shapes())
        self.hr_store = torch.empty(self.hr_total, dtype=torch.uint8)
        self.lr_store = torch.empty(self.lr_total, dtype=torch.uint8)
        self._fill(self.hr_store, self.lr_store)
        self.rebuilt = True

    def _cache_problem(self, folder: Path) -> str | None:
        """Why the on-disk cache in `folder` cannot be used as it is (None when it can), without mapping anything."""
        try:
            meta = json.loads(read_regular_bytes(folder / "meta.json", role="the cache's metadata"))
            shapes = [(int(h), int(w)) for h, w in meta["shapes"]]
            found = meta["fingerprint"]
        except FileNotFoundError:
            return "no cache yet"
        except (OSError, ValueError, KeyError, TypeError) as error:
            return f"damaged: {folder / 'meta.json'} is unreadable ({type(error).__name__}: {error})"
        if found != self.fingerprint:
            return "the source images changed"
        if shapes != self.header_shapes:
            return f"damaged: {folder / 'meta.json'} lists image sizes that differ from the images' own headers"
        self._layout(shapes)
        for name, want in (("hr.u8", self.hr_total), ("lr.u8", self.lr_total)):
            try:
                got = check_regular(folder / name, role="a cache store").st_size
            except OSError as error:  # missing, or a link, FIFO or folder put there
                return f"damaged: {error}"
            if got != want:
                return f"damaged: {folder / name} holds {got} bytes, {want} expected"
        return None

    def _build_on_disk(self, staging: Path) -> None:
        """Decode everything into a private staging folder's files, reserved on disk first (others wait for it)."""
        shapes = self.header_shapes
        self._layout(shapes)
        stores = []
        for name, size in (("hr.u8", self.hr_total), ("lr.u8", self.lr_total)):
            reserve_file(staging / name, size)  # a full disk fails here, before any pixel is decoded
            stores.append(np.memmap(staging / name, dtype=np.uint8, mode="r+", shape=(size,)))
        self._fill(torch.from_numpy(stores[0]), torch.from_numpy(stores[1]))
        for store in stores:
            store.flush()
        del stores
        meta = {"fingerprint": self.fingerprint, "paths": [str(p) for p in self.paths], "shapes": shapes}
        (staging / "meta.json").write_text(json.dumps(meta), encoding="utf-8")

    def _open_or_build_on_disk(self, cache_dir: Path) -> None:
        self.header_shapes = self._shapes()
        self.fingerprint = _fingerprint(self.paths, self.scale, self.header_shapes)
        # one folder per fingerprint: image sets sharing a cache_dir never build over, or serve, each other's stores
        folder = self.cache_folder = cache_dir / f"x{self.scale}-{self.fingerprint[:16]}"
        self.rebuild_reason = self._cache_problem(folder)
        if self.rebuild_reason is not None:
            if self.rebuild_reason.startswith("damaged"):
                warnings.warn(f"decoded cache {folder} is {self.rebuild_reason}; rebuilding it", stacklevel=3)
            self.rebuilt = build_once(folder, self._build_on_disk, is_complete=lambda p: self._cache_problem(p) is None)
        problem = self._cache_problem(folder)  # also lays the stores out from the published sizes
        if problem is not None:
            raise OSError(f"{folder}: the decoded cache is {problem} right after it was built; delete the folder")
        stores = []
        for name, size in (("hr.u8", self.hr_total), ("lr.u8", self.lr_total)):
            with open_regular(folder / name, role="a cache store") as f:  # the file checked is the file mapped
                stores.append(torch.from_numpy(np.memmap(f, dtype=np.uint8, mode="c", shape=(size,))))
        self.hr_store, self.lr_store = stores

    # reading
    @property
    def nbytes(self) -> int:
        """Bytes of the two uint8 stores."""
        return self.hr_total + self.lr_total

    def __len__(self) -> int:
        return len(self.paths)

    def image(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole (lr, hr) uint8 pair of image `index`, as (3, h, w) and (3, H, W) views of the RGBX stores."""
        height, width = self.shapes[index].tolist()
        h0, l0 = int(self.hr_offsets[index]), int(self.lr_offsets[index])
        hr = self.hr_store[h0 : h0 + PIXEL_BYTES * height * width].view(height, width, PIXEL_BYTES)
        lh, lw = height // self.scale, width // self.scale
        lr = self.lr_store[l0 : l0 + PIXEL_BYTES * lh * lw].view(lh, lw, PIXEL_BYTES)
        return lr[..., :3].permute(2, 0, 1), hr[..., :3].permute(2, 0, 1)

    def _paired_crops(self, images: list[int], ys: list[int], xs: list[int], hr_crop: int, choices: list[int]):
        # RGBX pixels are 32-bit words and NumPy views may have negative strides: crops, flips and transposes are free
        # views, one np.stack per batch the only copy (NumPy slicing: a fraction of torch's per-call overhead per crop).
        s, lr_crop = self.scale, hr_crop // self.scale
        hr_words, lr_words = self.hr_store.numpy().view(np.int32), self.lr_store.numpy().view(np.int32)
        hr_views, lr_views = [], []
        for index, y, x, choice in zip(images, ys, xs, choices):
            height, width = self._shape_list[index]
            hr_start, lr_start = self._hr_word_offsets[index], self._lr_word_offsets[index]
            hr = hr_words[hr_start : hr_start + height * width].reshape(height, width)
            hr = hr[y * s : y * s + hr_crop, x * s : x * s + hr_crop]
            lr = lr_words[lr_start : lr_start + (height // s) * (width // s)].reshape(height // s, width // s)
            lr = lr[y : y + lr_crop, x : x + lr_crop]
            if choice & 1:
                hr, lr = hr[:, ::-1], lr[:, ::-1]
            if choice & 2:
                hr, lr = hr[::-1], lr[::-1]
            if choice & 4:
                hr, lr = hr.T, lr.T
            hr_views.append(hr)
            lr_views.append(lr)
        # np.stack keeps the inputs' memory order: when every view is transposed its result is Fortran-ordered
        lr_batch, hr_batch = np.ascontiguousarray(np.stack(lr_views)), np.ascontiguousarray(np.stack(hr_views))
        return self._to_rgb(torch.from_numpy(lr_batch)), self._to_rgb(torch.from_numpy(hr_batch))

    @staticmethod
    def _to_rgb(words: torch.Tensor) -> torch.Tensor:
        batch, height, width = words.shape
        return words.view(torch.uint8).view(batch, height, width, PIXEL_BYTES)[..., :3].permute(0, 3, 1, 2)

    def sample(
        self, batch_size: int, *, hr_crop: int, generator: torch.Generator, augment: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch of aligned paired uint8 crops (LR origin x scale = HR origin): (B, 3, hr_crop/scale, ...) LR and
        (B, 3, hr_crop, hr_crop) HR; with `augment`, each pair gets its own random flip/rot90, the same on LR and HR."""
        if hr_crop not in self._checked_crops:
            check_sr_geometry(self.scale, hr_crop)
            too_small = (self.shapes < hr_crop).any(1).nonzero().flatten().tolist()
            if too_small:
                height, width = self.shapes[too_small[0]].tolist()
                raise ImageTooSmallError(
                    f"{self.paths[too_small[0]]}: image is {width}x{height} pixels, smaller than the "
                    f"{hr_crop}x{hr_crop} crop; use a smaller crop or remove the image"
                )
            self._checked_crops.add(hr_crop)
        s = self.scale
        images = torch.randint(0, len(self), (batch_size,), generator=generator)
        shapes = self.shapes[images]
        # LR-grid origins: HR origin = LR origin x scale, so the pair is aligned by construction
        ly = (torch.rand(batch_size, generator=generator) * ((shapes[:, 0] - hr_crop) // s + 1)).long()
        lx = (torch.rand(batch_size, generator=generator) * ((shapes[:, 1] - hr_crop) // s + 1)).long()
        choices = torch.randint(0, 8, (batch_size,), generator=generator) if augment else torch.zeros(batch_size)
        return self._paired_crops(images.tolist(), ly.tolist(), lx.tolist(), hr_crop, choices.int().tolist())


class CachedCropLoader:
    """Batches of paired crops from a DecodedSRCache: uint8 gathered on the CPU, moved, then made float on `device`.

    With `prefetch` batches ahead (default: 2 on an accelerator, 0 on the CPU, where the step already uses every
    core and a producer thread would only compete with it), the next batch is gathered in a background thread
    (`batches_ahead` says how many it can hold ready, so a measurement draws them before its clock starts).
    With `as_float=False` batches stay uint8 on the device, for a step that normalises them itself. `channels="y"`
    gives PIL's YCbCr Y of the crops (LR: the Y of the cache's MATLAB-bicubic LR). An epoch is `batches_per_epoch`
    batches, or, when None, a DataLoader's count over the images (the short last batch kept unless `drop_last`).
    """

    def __init__(
        self,
        cache: DecodedSRCache,
        *,
        batch_size: int,
        hr_crop: int = 128,
        batches_per_epoch: int | None = None,
        seed: int = 0,
        device: str | torch.device = "cpu",
        augment: bool = True,
        prefetch: int | None = None,
        as_float: bool = True,
        channels: str = "rgb",
        drop_last: bool = False,
    ) -> None:
        check_options(channels, "matlab-bicubic")
        self.cache, self.batch_size, self.hr_crop, self.augment = cache, batch_size, hr_crop, augment
        self.as_float, self.channels = as_float, channels
        self.batches_per_epoch, self._last = epoch_batches(len(cache), batch_size, batches_per_epoch, drop_last)
        self.device = torch.device(device)
        self.generator = torch.Generator().manual_seed(seed)
        self.prefetch = prefetch if prefetch is not None else (0 if self.device.type == "cpu" else 2)
        self.batches_ahead = self.prefetch + 1 if self.prefetch else 0  # ready before asked: its queue, its hand

    def __len__(self) -> int:
        return self.batches_per_epoch

    def __repr__(self) -> str:
        settings = (f"random {self.hr_crop}-px", self.augment, "the cache's matlab-bicubic", self.channels)
        return describe_sr_batches(type(self).__name__, (len(self), self._last), self.batch_size, *settings)

    def _host_batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        on_cuda = self.device.type == "cuda"
        for number in range(self.batches_per_epoch):
            size = self._last if number == self.batches_per_epoch - 1 else self.batch_size
            lr, hr = self.cache.sample(size, hr_crop=self.hr_crop, generator=self.generator, augment=self.augment)
            if self.channels == "y":  # PIL's YCbCr Y of the uint8 crops (one channel)
                lr, hr = rgb_to_luma(lr), rgb_to_luma(hr)
            if on_cuda:  # pinned uint8: a quarter of the bytes of float32, copied asynchronously
                yield lr.pin_memory(), hr.pin_memory()
            elif self.as_float:
                yield to_unit_float(lr), to_unit_float(hr)
            else:
                yield lr, hr

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        batches = BackgroundPrefetcher(self._host_batches(), self.prefetch) if self.prefetch else self._host_batches()
        for lr, hr in batches:
            if self.device.type != "cpu":
                lr, hr = lr.to(self.device, non_blocking=True), hr.to(self.device, non_blocking=True)
                if self.as_float:
                    lr, hr = to_unit_float(lr), to_unit_float(hr)
            yield lr, hr


class DeviceSRCropLoader:
    """The zero-CPU super-resolution pipeline: the decoded HR images as uint8 on the device, paired random crops
    taken there, LR made there by antialiased bicubic downscale, and the same random flip/rot90 on both.

    Yields float (lr, hr) batches on `device`; the CPU only draws a few random numbers per batch. `channels="y"`
    gives PIL's YCbCr Y (LR made from the Y crop, as a script resizing its Y image does) and `lr_resample` the filter;
    epochs are counted as CachedCropLoader counts them. `print(loader)` says what it yields.
    """

    def __init__(
        self,
        cache: DecodedSRCache,
        *,
        batch_size: int,
        hr_crop: int = 128,
        batches_per_epoch: int | None = None,
        seed: int = 0,
        device: str | torch.device = "cpu",
        augment: bool = True,
        channels: str = "rgb",
        lr_resample: str = "matlab-bicubic",
        drop_last: bool = False,
    ) -> None:
        check_sr_geometry(cache.scale, hr_crop)
        check_options(channels, lr_resample)
        self.channels, self.lr_resample = channels, lr_resample
        if (cache.shapes < hr_crop).any():
            index = int((cache.shapes < hr_crop).any(1).nonzero()[0])
            raise ImageTooSmallError(f"{cache.paths[index]}: smaller than the {hr_crop}x{hr_crop} crop")
        self.device = torch.device(device)
        self.scale, self.batch_size, self.hr_crop, self.augment = cache.scale, batch_size, hr_crop, augment
        self.batches_per_epoch, self._last = epoch_batches(len(cache), batch_size, batches_per_epoch, drop_last)
        self.generator = torch.Generator().manual_seed(seed)
        self.store = cache.hr_store.to(self.device)  # H x W x RGBX uint8, all images back to back
        self.offsets, self.shapes = cache.hr_offsets.to(self.device), cache.shapes.to(self.device)
        self.count = len(cache)
        ramp = torch.arange(hr_crop, device=self.device)
        # offsets inside one crop of an image of width W: (row * W + col) * 4 + channel
        self._rows, self._cols = ramp[:, None, None], ramp[None, :, None]
        self._channels = torch.arange(3, device=self.device)

    def __len__(self) -> int:
        return self.batches_per_epoch

    def __repr__(self) -> str:
        settings = (f"random {self.hr_crop}-px", self.augment, self.lr_resample, self.channels)
        return describe_sr_batches(type(self).__name__, (len(self), self._last), self.batch_size, *settings)

    def _batch(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        s, crop = self.scale, self.hr_crop
        # the draws are made on the host (one seeded generator on every device) and sent without a host wait
        images = host_to_device(torch.randint(0, self.count, (size,), generator=self.generator), self.device)
        heights, widths = self.shapes[images, 0], self.shapes[images, 1]
        draws = host_to_device(torch.rand(2, size, generator=self.generator), self.device)
        ys = (draws[0] * ((heights - crop) // s + 1)).long() * s  # multiples of the scale: LR/HR stay aligned
        xs = (draws[1] * ((widths - crop) // s + 1)).long() * s
        w = widths[:, None, None, None]
        index = (
            self.offsets[images, None, None, None]
            + ((ys[:, None, None, None] + self._rows) * w + xs[:, None, None, None] + self._cols) * PIXEL_BYTES
            + self._channels
        )
        hr = self.store[index].permute(0, 3, 1, 2)  # (B, 3, crop, crop) uint8
        hr = to_unit_float(rgb_to_luma(hr) if self.channels == "y" else hr)  # Y: PIL's, from the uint8 pixels
        lr = make_lr(hr, s, self.lr_resample)
        if self.augment:
            lr, hr = paired_dihedral(lr, hr, generator=self.generator)
        return lr, hr

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for number in range(self.batches_per_epoch):
            yield self._batch(self._last if number == self.batches_per_epoch - 1 else self.batch_size)
