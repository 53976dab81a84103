"""Run profiles: how big each notebook's runs are (smoke for CI, cpu for a laptop, full for a GPU)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

PROFILE_ENV_VAR = "COURSE_PROFILE"
PROFILE_NAMES = ("smoke", "cpu", "full")


@dataclass(frozen=True)
class Profile:
    """The sizes one profile gives every notebook and command."""

    name: str
    description: str
    gallery_images: int
    memory_images: int | None  # images for the memory lesson (None: the whole training split)
    bench_loader_batches: int  # batches timed for a loader on its own
    bench_steps_per_block: int  # steps per fed / pre-made block when a loader feeds a model
    bench_blocks: int  # interleaved blocks of each
    sweep_batches: int  # batches timed per DataLoader setting in a sweep
    cifar_images: int | None  # training images for the classification ladder (None: all)

    @property
    def is_smoke(self) -> bool:
        """True when numbers from this profile are only smoke-test numbers."""
        return self.name == "smoke"

    def label(self, text: str) -> str:
        """Prefix `text` with a smoke-run warning when this is the smoke profile."""
        return f"[smoke run: not a measurement] {text}" if self.is_smoke else text


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        "smoke", "seconds per notebook; checks that every lesson runs (CI)", gallery_images=4, memory_images=3,
        bench_loader_batches=2, bench_steps_per_block=1, bench_blocks=1, sweep_batches=2, cifar_images=512,
    ),
    "cpu": Profile(
        "cpu", "a few minutes per notebook on a laptop CPU", gallery_images=8, memory_images=None,
        bench_loader_batches=25, bench_steps_per_block=4, bench_blocks=10, sweep_batches=15, cifar_images=None,
    ),
    "full": Profile(
        "full", "the real runs, sized for one GPU", gallery_images=12, memory_images=None,
        bench_loader_batches=100, bench_steps_per_block=10, bench_blocks=10, sweep_batches=60, cifar_images=None,
    ),
}


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
