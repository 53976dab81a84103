"""Super-resolution datasets for the BSDS300 layout: the seed's traditional way, lazy crops, a decoded uint8 cache,
and whole-image evaluation."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import Dataset, get_worker_info

from .augment import dihedral
from .data import bsds300_split
from .images import ImageTooSmallError, check_crop_fits, load_rgb_image

SCALES = (2, 3, 4)
PIXEL_BYTES = 4  # the decoded cache stores RGBX: R, G, B and one padding byte


# --- shared pieces -----------------------------------------------------------------------------------------------


def resolve_image_paths(root_or_paths: str | os.PathLike | Sequence[str | os.PathLike], split: str = "train") -> list[Path]:
    """Return image paths: a list as given, a BSDS300-layout root's `split`, or every image in a folder."""
    if isinstance(root_or_paths, (str, os.PathLike)):
        root = Path(root_or_paths)
        if (root / "images" / split).is_dir():
            paths = bsds300_split(root, split)
        else:
            paths = sorted(p for p in root.iterdir() if p.suffix.lower() in {".jpg", ".jpeg", ".png", ".bmp"})
    else:
        paths = [Path(p) for p in root_or_paths]
    if not paths:
        raise ValueError(f"no images found in {root_or_paths}")
    return paths


def check_sr_geometry(scale: int, hr_crop: int) -> None:
    """Raise ValueError unless `scale` is 2, 3 or 4 and `hr_crop` is a positive multiple of it."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, not {scale}")
    if hr_crop <= 0 or hr_crop % scale:
        raise ValueError(f"hr_crop={hr_crop} is not a multiple of scale={scale}: LR and HR crops could not align")


def to_float(image: Image.Image | np.ndarray) -> torch.Tensor:
    """An RGB image (PIL or HWC uint8 array) as a float (3, H, W) tensor in [0, 1]."""
    array = np.array(image, dtype=np.uint8)  # a writable copy: torch warns on read-only buffers
    return torch.from_numpy(array).permute(2, 0, 1).float().div_(255)


def bicubic_downscale(hr: torch.Tensor, scale: int) -> torch.Tensor:
    """Antialiased bicubic downscale of a (C, H, W) or (N, C, H, W) float tensor by `scale`, clamped to [0, 1]."""
    batch = hr if hr.ndim == 4 else hr[None]
    lr = F.interpolate(batch, scale_factor=1 / scale, mode="bicubic", antialias=True, align_corners=False)
    lr = lr.clamp_(0, 1)
    return lr if hr.ndim == 4 else lr[0]


def mod_crop(image: Image.Image, scale: int) -> Image.Image:
    """Crop an image's right and bottom edges so both sides are multiples of `scale` (the standard SR protocol)."""
    width, height = image.width - image.width % scale, image.height - image.height % scale
    return image if (width, height) == image.size else image.crop((0, 0, width, height))


def random_dihedral(tensors: Sequence[torch.Tensor], generator: torch.Generator) -> list[torch.Tensor]:
    """Apply one random flip / 90-degree rotation (8 choices), the same one, to every (C, H, W) tensor."""
    choice = int(torch.randint(0, 8, (1,), generator=generator))
    return [dihedral(t, choice).contiguous() for t in tensors]


class _SeededDataset(Dataset):
    """Random draws from a per-process torch.Generator: each DataLoader worker (and rank) gets its own stream.

    In a worker the stream is seeded from the worker's seed, which the DataLoader derives from its own generator
    (so one seed reproduces every worker) plus the worker id (so workers differ). In the main process it is
    seeded from `seed`, or from torch's global RNG when `seed` is None.
    """

    seed: int | None

    def _generator(self) -> torch.Generator:
        info = get_worker_info()
        key = (info.id, info.seed) if info is not None else None
        if getattr(self, "_generator_key", "unset") != key:
            if info is not None:
                base = info.seed
            elif self.seed is not None:
                base = self.seed
            else:
                base = int(torch.randint(0, 2**62, (1,)))
            mixed = hashlib.blake2b(f"{base}:{self.seed}".encode(), digest_size=8).digest()
            self._rng = torch.Generator().manual_seed(int.from_bytes(mixed, "little") >> 1)
            self._generator_key = key
        return self._rng

    def _origin(self, width: int, height: int, hr_crop: int, scale: int, generator: torch.Generator) -> tuple[int, int]:
        """A random top-left corner, a multiple of `scale`, for an `hr_crop` square inside width x height."""
        max_x, max_y = (width - hr_crop) // scale, (height - hr_crop) // scale
        x = int(torch.randint(0, max_x + 1, (1,), generator=generator)) * scale
        y = int(torch.randint(0, max_y + 1, (1,), generator=generator)) * scale
        return x, y


# --- the traditional way -----------------------------------------------------------------------------------------


def write_upscaled_inputs(paths: Sequence[Path], scale: int, workdir: Path) -> list[tuple[Path, Path]]:
    """The traditional preprocessing pass: bicubic-downscale each image, upscale back to HR size, save as PNG.

    Returns (upscaled-LR file, HR file) pairs; the HR file is the original image.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    pairs = []
    for index, path in enumerate(paths):
        hr = mod_crop(load_rgb_image(path), scale)
        lr = hr.resize((hr.width // scale, hr.height // scale), Image.Resampling.BICUBIC)
        upscaled = lr.resize(hr.size, Image.Resampling.BICUBIC)
        target = workdir / f"{index:05d}_{path.stem}_x{scale}_upscaled.png"
        upscaled.save(target)
        pairs.append((target, path))
    return pairs


class NaiveSRDataset(_SeededDataset):
    """The seed post's traditional way, faithfully: pre-upscaled LR files on disk, whole images decoded per sample.

    A preprocessing pass writes every image's bicubic-downscaled-then-upscaled version as a temporary PNG. Each
    sample then reads and decodes the whole upscaled file and the whole HR file, converts both to float tensors,
    and only then crops. Returns (upscaled LR crop, HR crop), both (3, hr_crop, hr_crop).
    """

    def __init__(
        self,
        root_or_paths,
        scale: int = 4,
        hr_crop: int = 128,
        workdir: str | os.PathLike | None = None,
        seed: int | None = None,
    ) -> None:
        check_sr_geometry(scale, hr_crop)
        self.scale, self.hr_crop, self.seed = scale, hr_crop, seed
        self.paths = resolve_image_paths(root_or_paths)
        self._owns_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="naive_sr_"))
        self.pairs = write_upscaled_inputs(self.paths, scale, self.workdir)

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        upscaled_path, hr_path = self.pairs[index]
        upscaled = to_float(load_rgb_image(upscaled_path))  # the whole image, as float
        hr = to_float(mod_crop(load_rgb_image(hr_path), self.scale))
        height, width = hr.shape[1:]
        check_crop_fits((width, height), self.hr_crop, hr_path)
        x, y = self._origin(width, height, self.hr_crop, self.scale, self._generator())
        window = (slice(None), slice(y, y + self.hr_crop), slice(x, x + self.hr_crop))
        return upscaled[window].clone(), hr[window].clone()

    def cleanup(self) -> None:
        """Delete the temporary upscaled files (when this dataset created their folder)."""
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


class InMemoryNaiveSRDataset(_SeededDataset):
    """The traditional way held in memory: every upscaled LR and HR image preprocessed into float32 tensors."""

    def __init__(self, root_or_paths, scale: int = 4, hr_crop: int = 128, seed: int | None = None) -> None:
        check_sr_geometry(scale, hr_crop)
        self.scale, self.hr_crop, self.seed = scale, hr_crop, seed
        self.paths = resolve_image_paths(root_or_paths)
        self.inputs: list[torch.Tensor] = []
        self.targets: list[torch.Tensor] = []
        for path in self.paths:
            hr = mod_crop(load_rgb_image(path), scale)
            check_crop_fits(hr.size, hr_crop, path)
            lr = hr.resize((hr.width // scale, hr.height // scale), Image.Resampling.BICUBIC)
            self.inputs.append(to_float(lr.resize(hr.size, Image.Resampling.BICUBIC)))
            self.targets.append(to_float(hr))

    @property
    def nbytes(self) -> int:
        """Bytes held by the preprocessed float tensors."""
        return sum(t.numel() * t.element_size() for t in (*self.inputs, *self.targets))

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        hr = self.targets[index]
        x, y = self._origin(hr.shape[2], hr.shape[1], self.hr_crop, self.scale, self._generator())
        window = (slice(None), slice(y, y + self.hr_crop), slice(x, x + self.hr_crop))
        return self.inputs[index][window].clone(), hr[window].clone()


# --- lazy crops --------------------------------------------------------------------------------------------------


class LazyCropSRDataset(_SeededDataset):
    """Paired random crops computed in __getitem__: an HR crop at a scale-aligned origin, its LR by bicubic downscale.

    The same random flip/rot90 is applied to both. Returns (lr, hr) floats in [0, 1] of shapes
    (3, hr_crop/scale, hr_crop/scale) and (3, hr_crop, hr_crop). PIL still decodes the whole file for a crop.
    """

    def __init__(
        self, root_or_paths, scale: int = 4, hr_crop: int = 128, seed: int | None = None, augment: bool = True
    ) -> None:
        check_sr_geometry(scale, hr_crop)
        self.scale, self.hr_crop, self.seed, self.augment = scale, hr_crop, seed, augment
        self.paths = resolve_image_paths(root_or_paths)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        path = self.paths[index]
        image = load_rgb_image(path)
        check_crop_fits(image.size, self.hr_crop, path)
        generator = self._generator()
        x, y = self._origin(image.width, image.height, self.hr_crop, self.scale, generator)
        hr = to_float(image.crop((x, y, x + self.hr_crop, y + self.hr_crop)))
        lr = bicubic_downscale(hr, self.scale)
        if self.augment:
            lr, hr = random_dihedral((lr, hr), generator)
        return lr, hr


# --- decoded uint8 cache -----------------------------------------------------------------------------------------


def _fingerprint(paths: Sequence[Path], scale: int) -> str:
    digest = hashlib.blake2b(f"decoded-cache v3 (HW RGBX) x{scale}".encode(), digest_size=16)
    for path in paths:
        digest.update(str(path.resolve()).encode())
        digest.update(hashlib.blake2b(path.read_bytes(), digest_size=16).digest())
    return digest.hexdigest()


class DecodedSRCache:
    """Every HR image decoded once and its LR made once, in two contiguous uint8 stores (memory or memory-mapped).

    Images are stored height x width x RGBX (a padding byte per pixel): each crop row is one contiguous run of
    bytes, and each pixel one 32-bit word, which makes flips and rotations cheap. Batches come out as NCHW uint8.

    `sample(batch_size, generator)` takes aligned paired crops (LR origin x scale = HR origin) for a whole batch by
    tensor indexing, with no per-sample Python decoding. With `cache_dir`, the stores are files reused across runs
    and rebuilt when any source image changes (content fingerprint).
    """

    def __init__(self, root_or_paths, scale: int = 4, cache_dir: str | os.PathLike | None = None) -> None:
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, not {scale}")
        self.scale = scale
        self.paths = resolve_image_paths(root_or_paths)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.rebuilt = False
        self._checked_crops: set[int] = set()
        if self.cache_dir is None:
            self._build_in_memory()
        else:
            self._open_or_build_on_disk()

    # building
    def _decode_all(self):
        for path in self.paths:
            hr = to_float(mod_crop(load_rgb_image(path), self.scale))
            lr = bicubic_downscale(hr, self.scale)
            yield (hr * 255).round_().to(torch.uint8), (lr * 255).round_().to(torch.uint8)

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
        shapes = []
        for path in self.paths:
            with Image.open(path) as image:
                shapes.append((image.height - image.height % self.scale, image.width - image.width % self.scale))
        return shapes

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

    def _open_or_build_on_disk(self) -> None:
        folder = self.cache_dir / f"x{self.scale}"
        meta_path = folder / "meta.json"
        fingerprint = _fingerprint(self.paths, self.scale)
        meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
        if meta.get("fingerprint") != fingerprint:
            shutil.rmtree(folder, ignore_errors=True)
            staging = self.cache_dir / f".x{self.scale}.building"
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
            shapes = self._shapes()
            self._layout(shapes)
            hr_map = np.memmap(staging / "hr.u8", dtype=np.uint8, mode="w+", shape=(self.hr_total,))
            lr_map = np.memmap(staging / "lr.u8", dtype=np.uint8, mode="w+", shape=(self.lr_total,))
            self._fill(torch.from_numpy(hr_map), torch.from_numpy(lr_map))
            hr_map.flush()
            lr_map.flush()
            del hr_map, lr_map
            meta = {"fingerprint": fingerprint, "paths": [str(p) for p in self.paths], "shapes": shapes}
            (staging / "meta.json").write_text(json.dumps(meta))
            os.replace(staging, folder)  # a half-built cache is never taken as valid
            self.rebuilt = True
        self._layout([tuple(s) for s in meta["shapes"]])
        self.hr_store = torch.from_numpy(np.memmap(folder / "hr.u8", dtype=np.uint8, mode="c", shape=(self.hr_total,)))
        self.lr_store = torch.from_numpy(np.memmap(folder / "lr.u8", dtype=np.uint8, mode="c", shape=(self.lr_total,)))

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
        # Each RGBX pixel is one 32-bit word, and NumPy views may have negative strides: a crop, its flips and its
        # transpose are all free views, and one np.stack per batch makes the only copy. (NumPy slicing costs a
        # fraction of torch's per-call overhead, which dominates at 16 small crops per batch.)
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
        self, batch_size: int, hr_crop: int, generator: torch.Generator, augment: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch of aligned paired uint8 crops: (B, 3, hr_crop/scale, ...) LR and (B, 3, hr_crop, hr_crop) HR.

        With `augment`, each pair gets its own random flip/rot90, the same on LR and HR.
        """
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
    core and a producer thread would only compete with it), the next batch is gathered in a background thread.
    With `as_float=False` batches stay uint8 on the device, for a step that normalises them itself.
    """

    def __init__(
        self,
        cache: DecodedSRCache,
        batch_size: int,
        hr_crop: int = 128,
        batches_per_epoch: int | None = None,
        seed: int = 0,
        device: str | torch.device = "cpu",
        augment: bool = True,
        prefetch: int | None = None,
        as_float: bool = True,
    ) -> None:
        self.cache, self.batch_size, self.hr_crop, self.augment = cache, batch_size, hr_crop, augment
        self.as_float = as_float
        self.batches_per_epoch = batches_per_epoch or max(1, len(cache) // batch_size)
        self.device = torch.device(device)
        self.generator = torch.Generator().manual_seed(seed)
        self.prefetch = prefetch if prefetch is not None else (0 if self.device.type == "cpu" else 2)

    def __len__(self) -> int:
        return self.batches_per_epoch

    def _host_batches(self):
        on_cuda = self.device.type == "cuda"
        for _ in range(self.batches_per_epoch):
            lr, hr = self.cache.sample(self.batch_size, self.hr_crop, self.generator, self.augment)
            if on_cuda:  # pinned uint8: a quarter of the bytes of float32, copied asynchronously
                yield lr.pin_memory(), hr.pin_memory()
            elif self.as_float:
                yield lr.float().div_(255), hr.float().div_(255)
            else:
                yield lr, hr

    def __iter__(self):
        from .loading import BackgroundPrefetcher

        batches = BackgroundPrefetcher(self._host_batches(), self.prefetch) if self.prefetch else self._host_batches()
        for lr, hr in batches:
            if self.device.type != "cpu":
                lr, hr = lr.to(self.device, non_blocking=True), hr.to(self.device, non_blocking=True)
                if self.as_float:
                    lr, hr = lr.float().div_(255), hr.float().div_(255)
            yield lr, hr


class DeviceSRCropLoader:
    """The zero-CPU super-resolution pipeline: the decoded HR images as uint8 on the device, paired random crops
    taken there, LR made there by antialiased bicubic downscale, and the same random flip/rot90 on both.

    Yields float (lr, hr) batches on `device`; the CPU only draws a few random numbers per batch.
    """

    def __init__(
        self,
        cache: DecodedSRCache,
        batch_size: int,
        hr_crop: int = 128,
        batches_per_epoch: int | None = None,
        seed: int = 0,
        device: str | torch.device = "cpu",
        augment: bool = True,
    ) -> None:
        check_sr_geometry(cache.scale, hr_crop)
        if (cache.shapes < hr_crop).any():
            index = int((cache.shapes < hr_crop).any(1).nonzero()[0])
            raise ImageTooSmallError(f"{cache.paths[index]}: smaller than the {hr_crop}x{hr_crop} crop")
        self.device = torch.device(device)
        self.scale, self.batch_size, self.hr_crop, self.augment = cache.scale, batch_size, hr_crop, augment
        self.batches_per_epoch = batches_per_epoch or max(1, len(cache) // batch_size)
        self.generator = torch.Generator().manual_seed(seed)
        self.store = cache.hr_store.to(self.device)  # H x W x RGBX uint8, all images back to back
        self.offsets = cache.hr_offsets.to(self.device)
        self.shapes = cache.shapes.to(self.device)
        self.count = len(cache)
        ramp = torch.arange(hr_crop, device=self.device)
        # offsets inside one crop of an image of width W: (row * W + col) * 4 + channel
        self._rows, self._cols, self._channels = ramp[:, None, None], ramp[None, :, None], torch.arange(3, device=self.device)

    def __len__(self) -> int:
        return self.batches_per_epoch

    def _batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        s, crop = self.scale, self.hr_crop
        images = torch.randint(0, self.count, (self.batch_size,), generator=self.generator).to(self.device)
        heights, widths = self.shapes[images, 0], self.shapes[images, 1]
        draws = torch.rand(2, self.batch_size, generator=self.generator).to(self.device)
        ys = (draws[0] * ((heights - crop) // s + 1)).long() * s  # multiples of the scale: LR/HR stay aligned
        xs = (draws[1] * ((widths - crop) // s + 1)).long() * s
        w = widths[:, None, None, None]
        index = (
            self.offsets[images, None, None, None]
            + ((ys[:, None, None, None] + self._rows) * w + xs[:, None, None, None] + self._cols) * PIXEL_BYTES
            + self._channels
        )
        hr = self.store[index].permute(0, 3, 1, 2).float().div_(255)  # (B, 3, crop, crop)
        lr = bicubic_downscale(hr, s)
        if self.augment:
            from .augment import paired_dihedral

            lr, hr = paired_dihedral(lr, hr, self.generator)
        return lr, hr

    def __iter__(self):
        for _ in range(self.batches_per_epoch):
            yield self._batch()


# --- evaluation --------------------------------------------------------------------------------------------------


class SREvalDataset(Dataset):
    """Whole test images: HR cropped to a multiple of the scale, LR by bicubic downscale; (lr, hr) floats in [0, 1]."""

    def __init__(self, root_or_paths, scale: int = 4, split: str = "test") -> None:
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, not {scale}")
        self.scale = scale
        self.paths = resolve_image_paths(root_or_paths, split=split)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        hr = to_float(mod_crop(load_rgb_image(self.paths[index]), self.scale))
        return bicubic_downscale(hr, self.scale), hr
