"""The traditional pipelines the lessons measure against: the SR post's pre-upscaled files and float tensors, the
CIFAR post's per-sample PIL transforms at 224 px, and the ImageFolder of PNGs those posts read; and the memory the
traditional SR stores hold against the uint8 cache (01)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from torchvision import transforms

from ..atomic import build_once
from ..augment import CIFAR10_MEAN, CIFAR10_STD
from ..images import check_crop_fits, load_rgb_image, to_float_tensor
from ..sr_cache import PIXEL_BYTES, DecodedSRCache
from ..sr_data import SeededDataset, check_sr_geometry, list_images, mod_crop

# --- super-resolution: the traditional way -------------------------------------------------------------------------


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


class NaiveSRDataset(SeededDataset):
    """The seed post's traditional way, faithfully: pre-upscaled LR files on disk, whole images decoded per sample.

    A preprocessing pass writes every image's bicubic-downscaled-then-upscaled version as a temporary PNG. Each
    sample then reads and decodes the whole upscaled file and the whole HR file, converts both to float tensors,
    and only then crops. Returns (upscaled LR crop, HR crop), both (3, hr_crop, hr_crop).
    """

    def __init__(
        self,
        folder_or_paths: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        scale: int = 4,
        hr_crop: int = 128,
        workdir: str | os.PathLike | None = None,
        seed: int | None = None,
    ) -> None:
        check_sr_geometry(scale, hr_crop)
        self.scale, self.hr_crop, self.seed = scale, hr_crop, seed
        self.paths = list_images(folder_or_paths)
        self._owns_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="naive_sr_"))
        self.pairs = write_upscaled_inputs(self.paths, scale, self.workdir)

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        upscaled_path, hr_path = self.pairs[index]
        upscaled = to_float_tensor(load_rgb_image(upscaled_path))  # the whole image, as float
        hr = to_float_tensor(mod_crop(load_rgb_image(hr_path), self.scale))
        height, width = hr.shape[1:]
        check_crop_fits((width, height), self.hr_crop, path=hr_path)
        x, y = self._origin(width, height, self.hr_crop, self.scale, self._generator())
        window = (slice(None), slice(y, y + self.hr_crop), slice(x, x + self.hr_crop))
        return upscaled[window].clone(), hr[window].clone()

    def cleanup(self) -> None:
        """Delete the temporary upscaled files (when this dataset created their folder)."""
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


class InMemoryNaiveSRDataset(SeededDataset):
    """The traditional way held in memory: every upscaled LR and HR image preprocessed into float32 tensors."""

    def __init__(
        self,
        folder_or_paths: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        scale: int = 4,
        hr_crop: int = 128,
        seed: int | None = None,
    ) -> None:
        check_sr_geometry(scale, hr_crop)
        self.scale, self.hr_crop, self.seed = scale, hr_crop, seed
        self.paths = list_images(folder_or_paths)
        self.inputs: list[torch.Tensor] = []
        self.targets: list[torch.Tensor] = []
        for path in self.paths:
            hr = mod_crop(load_rgb_image(path), scale)
            check_crop_fits(hr.size, hr_crop, path=path)
            lr = hr.resize((hr.width // scale, hr.height // scale), Image.Resampling.BICUBIC)
            self.inputs.append(to_float_tensor(lr.resize(hr.size, Image.Resampling.BICUBIC)))
            self.targets.append(to_float_tensor(hr))

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


def sr_memory_by_scale(paths: list[Path], scales: tuple[int, ...] = (2, 3, 4)) -> list[dict[str, Any]]:
    """Bytes held by the traditional in-memory stores (float32 upscaled LR + HR) and by the uint8 cache, per scale."""
    rows = []
    for scale in scales:
        traditional = InMemoryNaiveSRDataset(paths, scale=scale, hr_crop=scale)
        cache = DecodedSRCache(paths, scale=scale)
        input_bytes = sum(t.numel() * t.element_size() for t in traditional.inputs)
        rows.append(
            {
                "scale": scale,
                "images": len(paths),
                "traditional_mib": traditional.nbytes / 2**20,
                "cache_mib": cache.nbytes / 2**20,
                "total_ratio": traditional.nbytes / cache.nbytes,
                # model inputs: float32 RGB at HR size against the LR's uint8 RGB bytes (padding not counted)
                "input_ratio": input_bytes / (cache.lr_total * 3 // PIXEL_BYTES),
            }
        )
        del traditional, cache
    return rows


# --- classification: the CIFAR post's pipeline --------------------------------------------------------------------


def seed_post_transform() -> Callable[[Image.Image], torch.Tensor]:
    """The CIFAR post's per-sample PIL pipeline: RandomResizedCrop(224), flip, ColorJitter, ToTensor, Normalize."""
    return transforms.Compose(
        [
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ColorJitter(0.2, 0.2, 0.2),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ]
    )


def native_size_transform() -> Callable[[Image.Image], torch.Tensor]:
    """The same family per sample with PIL at CIFAR's own 32 px: crop with padding, flip, jitter, grayscale."""
    return transforms.Compose(
        [
            transforms.RandomCrop(32, padding=4, padding_mode="reflect"),
            transforms.RandomHorizontalFlip(),
            transforms.RandomApply([transforms.ColorJitter(0.2, 0.2, 0.2, 0.05)], p=0.8),
            transforms.RandomGrayscale(p=0.2),
            transforms.ToTensor(),
            transforms.Normalize(CIFAR10_MEAN, CIFAR10_STD),
        ]
    )


def export_image_folder(
    images: torch.Tensor, labels: torch.Tensor, *, class_names: list[str], dest: str | os.PathLike
) -> Path:
    """Write uint8 (N, 3, H, W) images as PNGs in torchvision's ImageFolder layout (dest/<class>/<index>.png).

    Reuses `dest` when it already holds exactly these N files; writes atomically otherwise.
    """
    dest = Path(dest)
    marker = f".complete-{len(images)}"

    def build(staging: Path) -> None:
        for name in class_names:
            (staging / name).mkdir()
        array = images.permute(0, 2, 3, 1).numpy()
        for index, (pixels, label) in enumerate(zip(array, labels.tolist())):
            Image.fromarray(pixels).save(staging / class_names[label] / f"{index:06d}.png", compress_level=1)
        (staging / marker).touch()

    build_once(dest, build, is_complete=lambda folder: (folder / marker).is_file())  # one writer; others reuse it
    return dest
