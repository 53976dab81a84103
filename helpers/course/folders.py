"""07's course layer: a stand-in JPEG folder in the ImageFolder layout (scikit-image photographs cut to the size of
ordinary photos), and the ladder of loaders that feed a 224-px classifier from such a folder: the post's pipeline,
reduced-size decoding, the pre-resized store, decoding in a batch (nvJPEG on CUDA) with the augmentation on the
device, and WebDataset shards, each rung ending in the same normalised batch of crops."""

from __future__ import annotations

import importlib.util
import os
import statistics
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import kornia.augmentation as K
import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms
from torchvision.datasets import ImageFolder

from ..atomic import build_once
from ..augment import ToUnitFloat
from ..device_crop import IMAGENET_MEAN, IMAGENET_STD, Normalize, ToChannelsLast, decode_jpegs, device_train_augment
from ..jpeg_crop import ReducedCropDataset, decode_crop, jpeg_reduction, random_resized_crop_box
from ..loading import loader_generator, make_loader, seed_worker
from ..measure import to_device
from ..models import build_model, describe_model
from ..resized_store import ResizedStore, StoreCropDataset
from ..shards import sample_label, shard_dataset
from .data import data_root
from .ladder import LadderRun, Rung, run_ladder
from .ladder_steps import classification_train_step
from .profiles import Profile
from .standins import CIFAR_STANDIN_CLASSES, skimage_photo

FOLDER_MARKER = "STANDIN.txt"
SAMPLES = Profile.endless  # an epoch long enough that no measurement restarts the workers (the profile says why)


# --- the stand-in folder ---------------------------------------------------------------------------------------------


def _photo_cuts(photo: np.ndarray, count: int, size: tuple[int, int], rng: np.random.Generator) -> list[Image.Image]:
    """`count` different photographs of `size` (width, height) from one: a random zoom, window and mirror each; every
    fifth one portrait, as in a real folder."""
    source = Image.fromarray(photo)
    cuts = []
    for i in range(count):
        width, height = size if i % 5 else size[::-1]
        zoom = rng.uniform(1.0, 1.6) * max(width / source.width, height / source.height)
        scaled = source.resize(
            (max(width, round(source.width * zoom)), max(height, round(source.height * zoom))), Image.Resampling.BICUBIC
        )
        x, y = rng.integers(0, scaled.width - width + 1), rng.integers(0, scaled.height - height + 1)
        cut = scaled.crop((int(x), int(y), int(x) + width, int(y) + height))
        cuts.append(cut.transpose(Image.Transpose.FLIP_LEFT_RIGHT) if rng.random() < 0.5 else cut)
    return cuts


def write_jpeg_folder_standin(
    dest: str | os.PathLike, *, images_per_class: int, image_size: tuple[int, int] = (500, 375), quality: int = 90
) -> Path:
    """An ImageFolder-layout folder of JPEGs (dest/<class>/<class>_NNNN.jpg), one class per scikit-image photograph,
    `images_per_class` cuts of `image_size` each at JPEG `quality`; built once (a complete folder is kept)."""
    dest = Path(dest)
    stamp = f"jpeg folder stand-in: {images_per_class} per class, {image_size[0]}x{image_size[1]}, quality {quality}\n"

    def build(staging: Path) -> None:
        rng = np.random.default_rng(0)
        for name in CIFAR_STANDIN_CLASSES:
            (staging / name).mkdir()
            for i, cut in enumerate(_photo_cuts(skimage_photo(name), images_per_class, image_size, rng)):
                cut.save(staging / name / f"{name}_{i:04d}.jpg", quality=quality)
        (staging / FOLDER_MARKER).write_text(stamp, encoding="utf-8")

    def complete(path: Path) -> bool:
        marker = path / FOLDER_MARKER
        return marker.is_file() and marker.read_text(encoding="utf-8") == stamp

    build_once(dest, build, is_complete=complete)
    return dest


def prepare_jpeg_folder(images_per_class: int, image_size: tuple[int, int]) -> Path:
    """The stand-in folder for these sizes under the course's data folder."""
    name = f"standin-{images_per_class}x10-{image_size[0]}x{image_size[1]}"
    return write_jpeg_folder_standin(
        data_root() / "jpeg-folder" / name, images_per_class=images_per_class, image_size=image_size
    )


# --- what every rung ends in -----------------------------------------------------------------------------------------


def post_transform(size: int = 224) -> Callable[[Image.Image], torch.Tensor]:
    """The CIFAR post's per-sample PIL pipeline at `size`: RandomResizedCrop, flip, ColorJitter, ToTensor, Normalize."""
    return transforms.Compose(
        [
            transforms.RandomResizedCrop(size),
            transforms.RandomHorizontalFlip(),
            transforms.ColorJitter(0.2, 0.2, 0.2),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )


def finish_on_device(jitter: float = 0.2) -> nn.Sequential:
    """What is left after crop + flip in the workers, done on the uint8 batch: to float, ColorJitter, Normalize,
    channels_last."""
    return nn.Sequential(
        ToUnitFloat(),
        K.ColorJitter(jitter, jitter, jitter, 0.0, p=1.0),
        Normalize(IMAGENET_MEAN, IMAGENET_STD),  # its buffers move with .to(device); kornia's statistics do not
        ToChannelsLast(),
    )


class OnDevice:
    """A loader's batches finished on the device: uint8 crops (or a list of encoded or decoded images) in, the
    normalised channels_last batch out. With `decode`, the batch holds encoded JPEGs, decoded here on `device`."""

    def __init__(self, loader: Iterable, augment: nn.Module, device: torch.device, *, decode: bool = False) -> None:
        self.loader, self.augment, self.device, self.decode = loader, augment.to(device), device, decode

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for images, labels in self.loader:
            if self.decode:
                images = decode_jpegs(images, self.device)
            images = to_device(images, self.device)
            yield self.augment(images), labels.to(self.device, non_blocking=True)


class EncodedFiles(Dataset):
    """(path, label) samples as the files' bytes (a 1-D uint8 tensor) and the label: nothing decoded in the worker."""

    def __init__(self, samples: list[tuple[str, int]], *, decode: bool = False) -> None:
        self.samples, self.decode = samples, decode

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        data = torch.frombuffer(bytearray(Path(path).read_bytes()), dtype=torch.uint8)
        return (decode_jpegs([data])[0] if self.decode else data), label


def as_list(batch: list[tuple[torch.Tensor, int]]) -> tuple[list[torch.Tensor], torch.Tensor]:
    """collate_fn for images of different sizes: a list of tensors and a tensor of labels."""
    return [image for image, _ in batch], torch.tensor([label for _, label in batch])


def shard_crop(size: int) -> Callable[[dict], tuple[torch.Tensor, int]]:
    """A shard sample's JPEG bytes as a reduced-size RandomResizedCrop + flip, uint8, and its label."""

    def decode(sample: dict) -> tuple[torch.Tensor, int]:
        crop, _ = decode_crop(sample["jpg"], size)
        pixels = torch.from_numpy(np.array(crop)).permute(2, 0, 1).contiguous()
        return (pixels.flip(-1) if torch.rand(()) < 0.5 else pixels), sample_label(sample)

    return decode


# 07's profile's model name -> build_model's name and sizes: its "resnet18" is torchvision's, with the ImageNet stem
CLASSIFIERS: dict[str, tuple[str, dict[str, Any]]] = {
    "resnet18": ("resnet18_imagenet", {}),
    "small": ("small", {"width": 16}),
}


def classifier(name: str) -> Callable[[], nn.Module]:
    """The model every rung feeds: torchvision's ResNet18 (ImageNet stem, for 224 px) or a small CNN (smoke runs)."""
    model, sizes = CLASSIFIERS[name]
    classes = len(CIFAR_STANDIN_CLASSES)
    # the 224-px ResNet18 in channels_last, the layout the rungs feed it
    memory_format = torch.channels_last if model == "resnet18_imagenet" else torch.contiguous_format
    return lambda: build_model(model, num_classes=classes, **sizes).to(memory_format=memory_format)


# --- the ladder ------------------------------------------------------------------------------------------------------


def _workers_loader(
    dataset: Dataset, batch: int, workers: int, *, pin: bool, collate: Callable | None = None
) -> DataLoader:
    """A DataLoader with the course's seeding, `workers` persistent workers, batches pinned when `pin` (on CUDA, as
    the post's rung pins them: the copy to the device then need not wait), optionally a list collate."""
    if collate is None:
        return make_loader(
            dataset,
            batch,
            num_workers=workers,
            persistent_workers=workers > 0,
            samples_per_epoch=SAMPLES,
            pin_memory=pin,
        )
    # torch's Dataset declares no __len__ (an iterable-style one has none); RandomSampler is for a map-style one
    sampler = torch.utils.data.RandomSampler(dataset, num_samples=SAMPLES, generator=loader_generator(0))  # type: ignore[arg-type]
    extra: dict[str, Any] = {"persistent_workers": True, "prefetch_factor": 2} if workers else {}
    return DataLoader(
        dataset,
        batch_size=batch,
        sampler=sampler,
        drop_last=True,
        num_workers=workers,
        worker_init_fn=seed_worker,
        generator=loader_generator(0),
        collate_fn=collate,
        pin_memory=pin,
        **extra,
    )


def folder_ladder(
    folder: Path,
    store: ResizedStore,
    shards: list[Path],
    *,
    device: torch.device,
    size: int,
    batch: int,
    workers: int,
    model: Callable[[], nn.Module],
) -> list[Rung]:
    """07's rungs, each ending in the same normalised channels_last batch of `size`-px RandomResizedCrop + flip +
    ColorJitter crops on `device`, fed to the same model: the post's pipeline, reduced-size decoding, the store,
    decoding in a batch with the augmentation on the device, and WebDataset shards."""
    samples = ImageFolder(str(folder)).samples
    cuda = device.type == "cuda"

    def post() -> Iterable:
        return make_loader(
            ImageFolder(str(folder), transform=post_transform(size)),
            batch,
            num_workers=workers,
            persistent_workers=True,
            pin_memory=cuda,
            samples_per_epoch=SAMPLES,
        )

    def reduced() -> Iterable:
        loader = _workers_loader(ReducedCropDataset(samples, size), batch, workers, pin=cuda)
        return OnDevice(loader, finish_on_device(), device)

    def stored() -> Iterable:
        return OnDevice(
            _workers_loader(StoreCropDataset(store, size), batch, workers, pin=cuda), finish_on_device(), device
        )

    def batched_decode() -> Iterable:  # CUDA: files' bytes to the GPU, nvJPEG there; a CPU: decoded in the workers
        loader = _workers_loader(EncodedFiles(samples, decode=not cuda), batch, workers, pin=cuda, collate=as_list)
        return OnDevice(loader, device_train_augment(size, mean=IMAGENET_MEAN, std=IMAGENET_STD), device, decode=cuda)

    def sharded() -> Iterable:
        dataset = shard_dataset(shards, shard_crop(size), seed=0, shuffle_buffer=4 * batch).repeat()
        loader = DataLoader(
            dataset.batched(batch),
            batch_size=None,
            num_workers=workers,
            worker_init_fn=seed_worker,
            persistent_workers=workers > 0,
            pin_memory=cuda,
        )
        return OnDevice(loader, finish_on_device(), device)

    where = "nvJPEG on the GPU, batched" if cuda else "libjpeg-turbo on the CPU, in the DataLoader"
    ahead = 2 * workers
    return [
        Rung(
            f"the post: ImageFolder + PIL per sample, RandomResizedCrop({size}) + flip + ColorJitter, {workers} worker{'s' * (workers != 1)}",
            post,
            model,
            workers,
            classification_train_step,
            prefetched=ahead,
            role="post",
        ),
        Rung(
            f"PIL decodes the crop box first (at reduced size where the box allows), crop + flip in {workers} "
            f"worker{'s' * (workers != 1)}; jitter moved to the device",
            reduced,
            model,
            workers,
            classification_train_step,
            prefetched=ahead,
            role="box first",
        ),
        Rung(
            f"pre-resized uint8 store (short side {store.meta['short_side']}), crop + flip in {workers} worker{'s' * (workers != 1)}; "
            "jitter on the device",
            stored,
            model,
            workers,
            classification_train_step,
            prefetched=ahead,
            role="store",
        ),
        Rung(
            f"whole JPEGs decoded ({where}), crop + flip + jitter on the device in one batch",
            batched_decode,
            model,
            workers,
            classification_train_step,
            prefetched=ahead,
            role="whole-JPEG batch",
        ),
        Rung(
            f"WebDataset shards ({len(shards)}), box-first decoding in {workers} worker{'s' * (workers != 1)}; jitter on the device",
            sharded,
            model,
            workers,
            classification_train_step,
            prefetched=ahead,
            role="shards",
        ),
    ]


def measure_folder_ladder(
    folder: Path,
    store: ResizedStore,
    shards: list[Path],
    *,
    profile: Profile,
    device: torch.device,
    size: int,
    batch: int,
    workers: int,
    model_name: str,
) -> LadderRun:
    """07's ladder, built and run side by side in interleaved rounds (the one path for the notebook and any script)."""
    rungs = folder_ladder(
        folder, store, shards, device=device, size=size, batch=batch, workers=workers, model=classifier(model_name)
    )
    rows, timing = run_ladder(rungs, device=device, rounds=profile.ladder_rounds, turn_s=profile.ladder_turn_s)
    described = describe_model(CLASSIFIERS[model_name][0], **CLASSIFIERS[model_name][1])
    return LadderRun(rows, timing, f"JPEG folder ladder, {size}-px crops, batch {batch}, {described} step", [])


def optional_rows() -> list[tuple[str, str]]:
    """(loader, why it has no row here) for the peers this process cannot run: DALI and FFCV when not installed."""
    missing = []
    if importlib.util.find_spec("nvidia") is None or importlib.util.find_spec("nvidia.dali") is None:
        missing.append(("NVIDIA DALI", "not installed here (pip install nvidia-dali-cuda120; CUDA only)"))
    if importlib.util.find_spec("ffcv") is None:
        missing.append(
            (
                "FFCV",
                "not installed here (pip install ffcv builds against OpenCV and libjpeg-turbo "
                "development files, which a plain venv does not have)",
            )
        )
    return missing


def median_reduction(samples: list[tuple[str, int]], size: int, draws: int = 200) -> tuple[float, float]:
    """Over random RandomResizedCrop boxes of the folder's images: the share decoded at reduced size and the median
    share of pixels decoded (reduced pixels over full pixels)."""
    from_reduced, pixel_share = 0, []
    for i in range(draws):
        path, _ = samples[i % len(samples)]
        with Image.open(path) as image:
            width, height = image.size
        box = random_resized_crop_box(width, height)
        factor = jpeg_reduction(box, size)
        from_reduced += factor > 1
        pixel_share.append(1 / factor**2)
    return from_reduced / draws, statistics.median(pixel_share)
