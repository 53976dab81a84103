"""Run profiles, the one home of every size a course run uses: smoke (seconds, for CI), cpu (a laptop), full (a GPU).

Each notebook, ladder and recipe reads its sizes from the Profile in force; no size lives anywhere else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

PROFILE_ENV_VAR = "COURSE_PROFILE"
PROFILE_NAMES = ("smoke", "cpu", "full")


@dataclass(frozen=True)
class SRTraining:
    """The super-resolution recipe's sizes (SmallEDSR on paired crops from the decoded cache)."""

    features: int  # SmallEDSR channels
    blocks: int  # SmallEDSR residual blocks
    hr_crop: int  # HR crop side, pixels
    batch: int
    epochs: int
    batches_per_epoch: int
    learning_rate: float  # Adam's peak learning rate under OneCycle


@dataclass(frozen=True)
class CifarTraining:
    """The CIFAR-10 recipe's sizes (ResNet18 with the CIFAR stem, or a small CNN in smoke runs)."""

    images: int | None  # training images (None: all)
    batch: int
    epochs: int
    learning_rate: float  # SGD's peak learning rate under OneCycle
    model: str  # "resnet18" or "small"


@dataclass(frozen=True)
class Profile:
    """The sizes one profile gives every notebook and command."""

    name: str
    description: str
    notebook_limit_s: int  # the course runner stops a notebook that runs longer than this, and reports it
    gallery_images: int  # 00: photos in the gallery
    memory_images: int | None  # 01: images for the memory lesson (None: the whole training split)
    bench_loader_batches: int  # batches timed for a loader on its own
    bench_steps_per_block: int  # steps per fed / pre-made block when a loader feeds a model
    bench_blocks: int  # interleaved blocks of each
    sweep_batches: int  # 02: batches timed per DataLoader setting in a sweep
    cifar_images: int | None  # 04: training images for the classification ladder (None: all)
    cifar_ladder_batch: int  # 04: batch of the classification ladder
    cifar_ladder_model: str  # 04: "resnet18" (a GPU) or "small" (a CNN a CPU can time)
    cifar_ladder_steps: int  # 04: steps per block feeding the model (224-px inputs make CPU steps take seconds)
    cifar_ladder_blocks: int  # 04: interleaved blocks
    precision_steps: int  # 03: training steps per precision
    compare_steps: int  # 06: steps of the post's pipeline against the course's
    compare_batch: int  # 06: their batch
    gan: tuple[int, int, int, int]  # 07: SmallEDSR features, blocks, HR crop, batch of the GAN measurement
    sr: SRTraining  # 05 and `python -m helpers.train sr`
    cifar: CifarTraining  # 06 and `python -m helpers.train cifar`

    @property
    def is_smoke(self) -> bool:
        """True when numbers from this profile are only smoke-test numbers."""
        return self.name == "smoke"

    def label(self, text: str) -> str:
        """Prefix `text` with a smoke-run warning when this is the smoke profile."""
        return f"[smoke run: not a measurement] {text}" if self.is_smoke else text


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        "smoke", "seconds per notebook; checks that every lesson runs (CI)", notebook_limit_s=300, gallery_images=4, memory_images=3,
        bench_loader_batches=2, bench_steps_per_block=1, bench_blocks=1, sweep_batches=2, cifar_images=512,
        cifar_ladder_batch=64, cifar_ladder_model="small", cifar_ladder_steps=1, cifar_ladder_blocks=1,
        precision_steps=3, compare_steps=1, compare_batch=8, gan=(8, 1, 32, 4),
        sr=SRTraining(features=8, blocks=1, hr_crop=32, batch=4, epochs=2, batches_per_epoch=2, learning_rate=2e-3),
        cifar=CifarTraining(images=256, batch=64, epochs=1, learning_rate=0.1, model="small"),
    ),
    "cpu": Profile(
        "cpu", "a few minutes per notebook on a laptop CPU", notebook_limit_s=900, gallery_images=8, memory_images=None,
        bench_loader_batches=25, bench_steps_per_block=4, bench_blocks=10, sweep_batches=15, cifar_images=None,
        cifar_ladder_batch=128, cifar_ladder_model="small", cifar_ladder_steps=2, cifar_ladder_blocks=3,
        precision_steps=40, compare_steps=2, compare_batch=16, gan=(32, 4, 96, 16),
        sr=SRTraining(features=32, blocks=8, hr_crop=96, batch=16, epochs=8, batches_per_epoch=100, learning_rate=2e-3),
        cifar=CifarTraining(images=None, batch=128, epochs=3, learning_rate=0.2, model="resnet18"),
    ),
    "full": Profile(
        "full", "the real runs, sized for one GPU", notebook_limit_s=1800, gallery_images=12, memory_images=None,
        bench_loader_batches=100, bench_steps_per_block=10, bench_blocks=10, sweep_batches=60, cifar_images=None,
        cifar_ladder_batch=256, cifar_ladder_model="resnet18", cifar_ladder_steps=10, cifar_ladder_blocks=10,
        precision_steps=300, compare_steps=20, compare_batch=256, gan=(64, 16, 192, 16),
        sr=SRTraining(features=64, blocks=16, hr_crop=192, batch=16, epochs=30, batches_per_epoch=500,
                      learning_rate=1e-3),
        cifar=CifarTraining(images=None, batch=512, epochs=10, learning_rate=0.4, model="resnet18"),
    ),
}  # fmt: skip


def resolve_profile_name(requested: str | None = "auto", cuda_available: bool | None = None) -> str:
    """Return the profile name in force: COURSE_PROFILE wins, then `requested`; `auto` is full on CUDA, else cpu."""
    from_env = os.environ.get(PROFILE_ENV_VAR, "").strip().lower()
    name = from_env or (requested or "auto").strip().lower()
    if name == "auto":
        if cuda_available is None:
            cuda_available = torch.cuda.is_available()
        name = "full" if cuda_available else "cpu"
    if name not in PROFILES:
        source = f"the environment variable {PROFILE_ENV_VAR}" if from_env else "the requested profile"
        raise ValueError(f"unknown profile {name!r} from {source}: choose one of auto, {', '.join(PROFILE_NAMES)}")
    return name


def resolve_profile(requested: str | None = "auto", cuda_available: bool | None = None) -> Profile:
    """Return the Profile in force (see `resolve_profile_name`)."""
    return PROFILES[resolve_profile_name(requested, cuda_available)]
