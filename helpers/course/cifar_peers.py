"""The rungs `python -m helpers.course.bench cifar` adds beside the course's CIFAR ladder: the shipped crop + flip
configuration (`torchvision_cifar_augment` on the whole dataset held on the device as uint8), and FFCV as a peer
where FFCV is installed: the same training images written once
as an FFCV dataset (raw uint8 pixels), read back with the same work as `torchvision_cifar_augment` (a random
translation of up to 4 pixels with zero fill, a horizontal flip, Normalize to float32). Without FFCV the bench says
why there is no row."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import torch

from ..atomic import build_once
from ..augment import CIFAR10_MEAN, TORCHVISION_RECIPE_STD, torchvision_cifar_augment
from ..loading import DeviceTensorLoader

try:  # optional: FFCV builds against OpenCV and libjpeg-turbo development files, which most machines lack
    from ffcv.fields import IntField, RGBImageField
    from ffcv.fields.decoders import IntDecoder, SimpleRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import (
        NormalizeImage,
        RandomHorizontalFlip,
        RandomTranslate,
        Squeeze,
        ToDevice,
        ToTensor,
        ToTorchImage,
    )
    from ffcv.writer import DatasetWriter
except ImportError as error:
    FFCV_MISSING: str | None = f"FFCV is not importable here ({error})"
else:
    FFCV_MISSING = None


class _Pairs:
    """(HWC uint8 image, label) pairs for FFCV's writer."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        self.images, self.labels = images.permute(0, 2, 3, 1).contiguous().numpy(), labels.numpy()

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return self.images[index], int(self.labels[index])


def write_beton(images: torch.Tensor, labels: torch.Tensor, dest: str | os.PathLike, workers: int) -> Path:
    """The images (N, 3, H, W uint8) and labels as an FFCV dataset file at `dest`, raw pixels, written once."""

    def build(staging: Path) -> None:
        fields = {"image": RGBImageField(write_mode="raw"), "label": IntField()}
        DatasetWriter(str(staging), fields, num_workers=max(1, workers)).from_indexed_dataset(_Pairs(images, labels))

    build_once(dest, build, is_complete=lambda path: path.is_file() and path.stat().st_size > 0, folder=False)
    return Path(dest)


def ffcv_loader(path: Path, *, batch_size: int, device: torch.device, workers: int, seed: int = 0) -> Iterable:
    """FFCV's Loader doing torchvision_cifar_augment's work: translate (zero fill) + flip on uint8, Normalize."""
    mean = np.array(CIFAR10_MEAN) * 255
    std = np.array(TORCHVISION_RECIPE_STD) * 255
    # NormalizeImage runs on the uint8 numpy batch before ToTensor (FFCV's compiled CPU path); on CUDA after ToDevice
    to_device = [ToDevice(device, non_blocking=True)] if device.type == "cuda" else []
    normalize = NormalizeImage(mean, std, np.float32)
    head = [SimpleRGBImageDecoder(), RandomHorizontalFlip(), RandomTranslate(padding=4, fill=(0, 0, 0))]
    if device.type == "cuda":
        image = head + [ToTensor(), *to_device, ToTorchImage(), normalize]
    else:
        image = head + [normalize, ToTensor(), ToTorchImage()]
    label = [IntDecoder(), ToTensor(), *to_device, Squeeze()]
    return Loader(
        str(path),
        batch_size=batch_size,
        num_workers=max(1, workers),
        order=OrderOption.RANDOM,
        drop_last=True,
        os_cache=True,
        seed=seed,
        batches_ahead=FFCV_AHEAD,
        pipelines={"image": image, "label": label},
    )


FFCV_AHEAD = 3  # batches FFCV's Loader prepares ahead in its threads (its batches_ahead): drained untimed per turn
FFCV_RUNG = "FFCV peer: .beton of raw uint8, translate (zero fill) + flip, Normalize to float32"


def ffcv_cifar_build(
    images: torch.Tensor, labels: torch.Tensor, *, dest: Path, device: torch.device, batch_size: int, workers: int
) -> Callable[[], Iterable] | None:
    """How the CIFAR ladder builds its FFCV rung (the dataset file is written once, here), or None where FFCV is not
    installed (FFCV_MISSING says why)."""
    if FFCV_MISSING is not None:
        return None
    path = write_beton(images, labels, dest, workers)
    return lambda: ffcv_loader(path, batch_size=batch_size, device=device, workers=workers)


CROP_FLIP_RUNG = "whole dataset as uint8 on the device + crop + flip on uint8 in one copy, then Normalize (torchvision_cifar_augment)"


def crop_flip_build(
    images: torch.Tensor, labels: torch.Tensor, *, device: torch.device, batch_size: int, seed: int = 0
) -> Callable[[], Iterable]:
    """How the CIFAR bench builds the shipped crop + flip rung: DeviceTensorLoader with torchvision_cifar_augment."""

    def build() -> Iterable:
        return DeviceTensorLoader(
            images,
            labels,
            batch_size=batch_size,
            device=device,
            drop_last=True,
            seed=seed,
            augment=torchvision_cifar_augment().to(device),
        )

    return build
