"""The classification ladder (04 and `python -m helpers.course.bench cifar`): the seed post's 224-px ImageFolder + PIL
pipeline at the batch that fits, the same family at 32 px, and the whole dataset on the device with kornia
augmentation, against its ceiling."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torchvision.datasets import ImageFolder

from ..augment import NormalizeToFloat, cifar_train_augment
from ..batch_size import batch_for_step_time, batch_that_fits
from ..cifar import cifar10_class_names
from ..env import usable_cpu_count
from ..loading import DeviceTensorLoader, make_loader
from ..loadmeter import busy_cores, cpu_budget, intra_op_threads
from ..measure import seconds_per_call
from ..models import build_model, describe_model
from ..step import TrainStep
from .baselines import (
    export_image_folder,
    native_size_transform,
    seed_post_transform,
)
from .cifar_peers import CROP_FLIP_RUNG, FFCV_AHEAD, FFCV_MISSING, FFCV_RUNG, crop_flip_build, ffcv_cifar_build
from .data import data_root
from .ladder import LadderRun, Rung, run_ladder
from .ladder_steps import classification_train_step
from .profiles import Profile


def seed_post_batch(
    model: Callable[[], nn.Module],
    *,
    device: torch.device,
    wanted: int,
    step_s: float | None = None,
    threads: int | None = None,
    precision: str | None = None,
) -> tuple[int, str]:
    """The batch the post's 224-px pipeline can train at here: one step measured, scaled to the free memory (halved
    on a CUDA out-of-memory error) and, with `step_s`, to a step of at most about that many seconds (timed at a
    representative batch after a warm-up, checked at the batch chosen; the sentence gives the predicted step time),
    timed with `threads` intra-op threads when given (the rung's CPU budget, so the prediction is for its step), and in
    `precision` when given (a TrainStep in channels_last, as a lesson that trains in that precision times it; else
    the ladder's fp32 classification step)."""
    torch.manual_seed(0)
    net = model().to(device)
    if precision is None:
        plain = classification_train_step(net)
        step: Callable[[torch.Tensor, torch.Tensor], Any] = lambda images, labels: plain((images, labels))  # noqa: E731
    else:
        optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        step = TrainStep(net, optimizer, nn.CrossEntropyLoss(), device=device, precision=precision, channels_last=True)

    def run(batch: int) -> None:
        images = torch.randn(batch, 3, 224, 224, device=device)
        step(images, torch.randint(0, 10, (batch,), device=device))

    batch, why = batch_that_fits(run, wanted=wanted, device=device)
    if step_s is not None:
        with intra_op_threads(threads or torch.get_num_threads()):
            batch, _, timed = batch_for_step_time(
                lambda n: seconds_per_call(lambda: run(n), calls=1, warmup=0, device=device),
                largest=batch,
                step_s=step_s,
            )
        why += f"; {timed}" + (f", with the rung's {threads} intra-op thread{'s' * (threads != 1)}" if threads else "")
    return batch, why


def ceiling_conversion(augment: nn.Module) -> nn.Module:
    """What a ceiling rung runs instead of `augment`: its final conversion (the last `NormalizeToFloat` in it, with its
    mean, std and memory format) and no random work, so the ceiling's batches reach the step in the same dtype,
    layout and normalisation as the rung it bounds; the course's default conversion when `augment` has none."""
    found = [m for m in augment.modules() if isinstance(m, NormalizeToFloat)]
    if not found:
        return cifar_train_augment()[-1]
    return copy.deepcopy(found[-1])


def cifar_ladder(
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    image_folder: Path,
    device: torch.device,
    batch_size: int,
    seed_batch: int,
    model: Callable[[], nn.Module],
    workers: int = 2,
    seed: int = 0,
    augment: Callable[[], nn.Module] | None = None,
) -> list[Rung]:
    """The classification ladder: the seed post's ImageFolder + PIL pipeline at 224 px (batch `seed_batch`, what
    fits in memory), the same family at 32 px, and the whole dataset as one uint8 tensor on the device with kornia
    batch augmentation (with and without); `augment` builds the on-device rung's augmentation instead of
    `cifar_train_augment`."""
    make_augment = augment or cifar_train_augment
    what = "your kornia batch augmentation" if augment else "kornia batch augmentation (crop, flip, jitter, grayscale)"
    pin = device.type == "cuda"
    samples = Profile.endless  # an epoch long enough that no measurement restarts the workers
    seed_workers = min(4, cpu_budget(max(1, workers), usable_cpu_count())[0])  # the post's 4, within the CPU budget

    def folder_loader(transform: Callable[[Any], Any], batch: int) -> Iterable:
        """The PNG folder decoded and transformed per sample by PIL in the seed post's workers."""
        dataset = ImageFolder(str(image_folder), transform=transform)
        return make_loader(
            dataset,
            batch,
            seed=seed,
            num_workers=seed_workers,
            pin_memory=pin,
            persistent_workers=True,
            samples_per_epoch=samples,
        )

    def seed_post() -> Iterable:
        return folder_loader(seed_post_transform(), seed_batch)

    def native_pil() -> Iterable:
        return folder_loader(native_size_transform(), batch_size)

    def on_device(augment: bool):
        def build():
            transform = make_augment() if augment else ceiling_conversion(make_augment())
            return DeviceTensorLoader(
                images,
                labels,
                batch_size=batch_size,
                device=device,
                augment=transform.to(device),
                drop_last=True,
                seed=seed,
            )

        return build

    capped = " (the post's 4, capped by this machine's CPU budget)" if seed_workers < 4 else ""
    return [
        Rung(
            f"seed post: ImageFolder PNG + PIL per sample, RandomResizedCrop(224), {seed_workers} worker{'s' * (seed_workers != 1)}{capped}, "
            f"batch {seed_batch}",
            seed_post,
            model,
            seed_workers,
            classification_train_step,
            role="seed post",
            model_note="the same network on 224-px crops: (224/32)^2 = 49x the pixels of a 32-px image",
        ),
        Rung(
            f"ImageFolder PNG + PIL per sample at 32 px (crop, flip, jitter, grayscale), {seed_workers} worker{'s' * (seed_workers != 1)}",
            native_pil,
            model,
            seed_workers,
            classification_train_step,
            role="native size",
        ),
        Rung(
            f"whole dataset as uint8 on the device + {what}",
            on_device(True),
            model,
            0,
            classification_train_step,
            role="device",
        ),
        Rung(
            "whole dataset as uint8 on the device, no augmentation, the same conversion to normalised float (the "
            "ceiling)",
            on_device(False),
            model,
            0,
            classification_train_step,
            role="ceiling",
            bounds="device",
        ),
    ]


def cifar_image_folder(images: torch.Tensor, labels: torch.Tensor, source: Any) -> Path:
    """The images as an ImageFolder of PNGs (what the seed post's pipeline reads), written once per data set and size."""
    slug = "standin" if source.is_standin else "cifar10"
    return export_image_folder(
        images,
        labels,
        class_names=cifar10_class_names(source.root),
        dest=data_root() / "imagefolder" / f"{slug}-{len(images)}",
    )


def _cifar_peers(
    rungs: list[Rung],
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    model: Callable[[], nn.Module],
    device: torch.device,
    batch_size: int,
    slug: str,
) -> list[str]:
    """The bench's peers before the ceiling: the shipped crop + flip configuration, and FFCV doing the same work where
    it is installed; returns the notes to print (why there is no FFCV row)."""
    rungs.insert(
        -1,
        Rung(
            CROP_FLIP_RUNG,
            crop_flip_build(images, labels, device=device, batch_size=batch_size),
            model,
            0,
            classification_train_step,
            role="crop + flip",
        ),
    )
    ffcv = ffcv_cifar_build(
        images,
        labels,
        dest=data_root() / "ffcv" / f"{slug}.beton",
        device=device,
        batch_size=batch_size,
        workers=max(1, usable_cpu_count()),
    )
    if ffcv is None:
        return [f"FFCV: no row ({FFCV_MISSING}; pip install ffcv, with OpenCV and libjpeg-turbo development files)"]
    rungs.insert(-1, Rung(FFCV_RUNG, ffcv, model, 0, classification_train_step, prefetched=FFCV_AHEAD + 1, role="FFCV"))
    return []


def measure_cifar_ladder(
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    image_folder: Path,
    profile: Profile,
    device: torch.device,
    batch_size: int | None = None,
    peers: bool = False,
    augment: Callable[[], nn.Module] | None = None,
) -> LadderRun:
    """04's ladder and `python -m helpers.course.bench cifar`: the post's 224-px rung at the batch that fits, the same family
    at 32 px, and the on-device rungs, with the profile's model, run side by side; with `peers` (the bench) also the
    shipped crop + flip configuration and FFCV doing the same work where FFCV is installed. `augment` builds the
    on-device rung's augmentation (default `cifar_train_augment`)."""
    batch_size = batch_size or profile.cifar_ladder_batch
    model = functools.partial(build_model, profile.cifar_ladder_model)  # models.py: the one home of the choice
    cores, busy = usable_cpu_count(), busy_cores()  # one reading for the seed batch and the ladder's threads
    seed_workers = min(4, cpu_budget(cores, cores)[0])  # cifar_ladder's seed-post workers: the step keeps the rest
    seed_batch, why = seed_post_batch(
        model,
        device=device,
        wanted=batch_size,
        step_s=profile.ladder_turn_s / 3,
        threads=cpu_budget(seed_workers, cores, busy)[1],
    )
    rungs = cifar_ladder(
        images,
        labels,
        image_folder=image_folder,
        device=device,
        batch_size=batch_size,
        seed_batch=seed_batch,
        model=model,
        workers=max(1, usable_cpu_count()),
        augment=augment,
    )
    notes = [f"the post's 224-px rung: {why}"]
    if peers:
        notes += _cifar_peers(
            rungs, images, labels, model=model, device=device, batch_size=batch_size, slug=image_folder.name
        )
    rows, timing = run_ladder(
        rungs, device=device, rounds=profile.ladder_rounds, turn_s=profile.ladder_turn_s, busy=busy
    )  # the busy cores its seed batch was sized with
    label = f"batch {batch_size}, {len(images)} images, {describe_model(profile.cifar_ladder_model)} training step"
    return LadderRun(rows, timing, label, notes)
