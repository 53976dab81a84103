"""Run profiles, the one home of every size a course run uses: smoke (seconds, for CI), cpu (a laptop), full (a GPU).

Each notebook, ladder and recipe reads its sizes from the Profile in force; no size lives anywhere else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

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
    batches_per_epoch: int  # an "epoch" of random crops: evaluation and checkpoints happen between them
    learning_rate: float  # Adam's peak learning rate under OneCycle
    budget_s: float | None  # seconds of training: the step count is calibrated to fit (None: `steps` exactly)
    steps: int  # the step count when there is no budget; the most steps a budget may buy otherwise


@dataclass(frozen=True)
class CifarTraining:
    """The CIFAR-10 recipe's sizes (ResNet18 with the CIFAR stem, or a small CNN in smoke runs)."""

    images: int | None  # training images (None: all)
    batch: int
    learning_rate: float  # SGD's peak learning rate under OneCycle
    model: str  # "resnet18" or "small"
    budget_s: float | None  # seconds of training: the step count is calibrated to fit (None: `steps` exactly)
    steps: int  # the step count when there is no budget; the most steps a budget may buy otherwise


@dataclass(frozen=True)
class FolderLesson:
    """07's sizes: the stand-in JPEG folder, the crop the ladder feeds its model, the store and the shards."""

    images_per_class: int  # stand-in JPEGs per class (10 classes)
    image_size: tuple[int, int]  # their width, height (the "about 500x375" outside smoke runs)
    crop: int  # RandomResizedCrop output side, pixels (224 outside smoke runs)
    store_short_side: int  # the pre-resized store's short side, pixels
    batch: int
    model: str  # "resnet18" (torchvision's, ImageNet stem) or "small" (a CNN, smoke runs)
    per_shard: int  # samples per WebDataset shard
    max_workers: int = 4  # DataLoader workers at most, within the usable cores (0: the main process loads)


@dataclass(frozen=True)
class Profile:
    """The sizes one profile gives every notebook and command. Time budgets are enforced by calibrating on a few
    steps first; nothing here assumes how fast the machine is."""

    name: str
    description: str
    notebook_limit_s: int  # the course runner stops a notebook that runs longer than this, and reports it
    gallery_images: int  # 00: photos in the gallery
    memory_images: int | None  # 01: images for the memory lesson (None: the whole training split)
    sr_batch: int  # 01, 02, 05: batch of the SR pipeline measurements (ESPCN / SmallEDSR steps)
    sr_crop: int  # ... and their HR crop, pixels (x4: the LR crop is a quarter of it)
    pipeline_blocks: int  # interleaved fed / pre-made block pairs when one loader feeds a model
    pipeline_budget_s: float  # seconds such a measurement may take (01, 05, 08)
    ladder_rounds: int  # 02, 04: rounds in which every rung of a ladder gets one turn
    ladder_turn_s: float  # seconds of one rung's turn
    sweep_batches: int  # 02: batches timed per DataLoader setting and repeat
    sweep_repeats: int  # 02: repeats of the whole sweep (interleaved), for the error bars
    cifar_images: int | None  # 04: training images for the classification ladder (None: all)
    cifar_ladder_batch: int  # 04: batch of the classification ladder (the 224-px rung takes what fits)
    cifar_ladder_model: str  # 04: "resnet18" (a GPU) or "small" (a CNN a CPU can time at 224 px)
    precision_budget_s: float  # 03: seconds of training steps per precision (at least a few steps each)
    conv_batch: int  # 03: batch of the channels_last measurement (a small CNN on 32-px images)
    compare_steps: int  # 06: timed steps of the post's pipeline and of the course's (after a warm-up step)
    compare_batch: int  # 06: their batch (the 224-px pipeline takes what fits)
    compare_model: str  # 06: "resnet18", or "small" where even one 224-px ResNet18 step is too long (smoke)
    gan: tuple[int, int, int, int]  # 08: SmallEDSR features, blocks, HR crop, batch of the GAN measurement
    sr: SRTraining  # 05 and `python -m helpers.course.train sr`
    cifar: CifarTraining  # 06 and `python -m helpers.course.train cifar`
    doctor_budget_s: float = 8.0  # 01: seconds of timed blocks per run of the doctor on the notebook's own loop
    sweep_max_workers: int = 32  # 02: the most DataLoader workers the workers x threads sweep tries
    wait_compute_steps: int = 8  # 01: steps of the written-out loop that splits data wait from compute
    precision_rounds: int = 5  # 03: interleaved rounds of the fp32 / bf16 / fp16 training comparison
    conv_rounds: int = 7  # 03: interleaved rounds of the channels_last comparison
    conv_per_round: int = 3  # 03: ... and the steps timed in each
    speedup_rounds: int = 5  # 03: interleaved rounds of the step-side speed-ups
    speedup_per_round: int = 3  # 03: ... and the steps timed in each
    compile_skip: str | None = None  # 03: why the step-side speed-ups leave torch.compile out (None: it is timed)
    pair_batches: int = 10  # 04: batches timed per turn of the two SR loaders (after 2 warm-up batches)
    straggler_batches: int = 40  # 04: batches per round of the DataLoader with one slow worker
    decode_images: int = 20  # 08: JPEGs each decoder decodes
    decode_repeats: int = 3  # 08: repeats of the decoder comparison
    endless: ClassVar[int] = 10**6  # batches or samples in an "epoch" no measurement reaches: workers never restart

    @property
    def is_smoke(self) -> bool:
        """True when numbers from this profile are only smoke-test numbers."""
        return self.name == "smoke"

    @property
    def folders(self) -> FolderLesson:
        """07's sizes for this profile."""
        return FOLDER_LESSONS[self.name]

    def label(self, text: str, *, data: str | None = None, device: object = None) -> str:
        """`text` with the data it came from and the device it ran on, marked when it is a smoke run."""
        where = "; ".join(
            part for part in (f"data: {data}" if data else "", f"device: {device}" if device else "") if part
        )
        text = f"{text} [{where}]" if where else text
        return f"[smoke run: not a measurement] {text}" if self.is_smoke else text


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        "smoke",
        "seconds per notebook; checks that every lesson runs (CI)",
        notebook_limit_s=300,
        gallery_images=4,
        memory_images=3,
        sr_batch=4,
        sr_crop=64,
        pipeline_blocks=1,
        pipeline_budget_s=1,
        ladder_rounds=1,
        ladder_turn_s=0.3,
        sweep_batches=2,
        sweep_repeats=1,
        cifar_images=256,
        cifar_ladder_batch=16,
        cifar_ladder_model="small",
        precision_budget_s=0.5,
        conv_batch=16,
        compare_steps=1,
        compare_batch=4,
        compare_model="small",
        gan=(8, 1, 32, 4),
        sr=SRTraining(
            features=8, blocks=1, hr_crop=32, batch=4, batches_per_epoch=2, learning_rate=2e-3, budget_s=None, steps=4
        ),
        cifar=CifarTraining(images=256, batch=64, learning_rate=0.1, model="small", budget_s=None, steps=4),
        doctor_budget_s=0.3,
        sweep_max_workers=1,
        wait_compute_steps=2,
        precision_rounds=3,
        conv_rounds=3,
        conv_per_round=1,
        speedup_rounds=3,
        speedup_per_round=1,
        compile_skip="skipped in the smoke profile: compiling takes longer than the whole smoke run",
        pair_batches=3,
        straggler_batches=6,
        decode_images=4,
        decode_repeats=1,
    ),
    "cpu": Profile(
        "cpu",
        "a few minutes per notebook on a laptop CPU",
        notebook_limit_s=900,
        gallery_images=8,
        memory_images=None,
        sr_batch=16,
        sr_crop=128,
        pipeline_blocks=5,
        pipeline_budget_s=20,
        ladder_rounds=5,
        ladder_turn_s=3,
        sweep_batches=8,
        sweep_repeats=3,
        cifar_images=None,
        cifar_ladder_batch=128,
        cifar_ladder_model="small",
        precision_budget_s=12,
        conv_batch=128,
        compare_steps=6,
        compare_batch=32,
        compare_model="resnet18",
        gan=(32, 4, 96, 16),
        sr=SRTraining(
            features=32,
            blocks=8,
            hr_crop=96,
            batch=16,
            batches_per_epoch=100,
            learning_rate=2e-3,
            budget_s=150,
            steps=4000,
        ),
        cifar=CifarTraining(images=None, batch=128, learning_rate=0.2, model="resnet18", budget_s=150, steps=4000),
    ),
    "full": Profile(
        "full",
        "the real runs, sized for one GPU",
        notebook_limit_s=1800,
        gallery_images=12,
        memory_images=None,
        sr_batch=16,
        sr_crop=128,
        pipeline_blocks=5,
        pipeline_budget_s=10,
        ladder_rounds=5,
        ladder_turn_s=2,
        sweep_batches=30,
        sweep_repeats=3,
        cifar_images=None,
        cifar_ladder_batch=256,
        cifar_ladder_model="resnet18",
        precision_budget_s=10,
        conv_batch=256,
        compare_steps=20,
        compare_batch=256,
        compare_model="resnet18",
        gan=(64, 16, 192, 16),
        # 05 trains this twice (x4, then x2) within notebook_limit_s: 480 s each keeps both inside it on a T4 that
        # sustains only 2/3 of the speed it calibrated at; an epoch of 2,000 batches evaluates BSD100 (its LR made
        # on the CPU) a few dozen times on an H200, not hundreds (results/estimates/notebook-costs-full.json)
        sr=SRTraining(
            features=64,
            blocks=16,
            hr_crop=192,
            batch=16,
            batches_per_epoch=2000,
            learning_rate=1e-3,
            budget_s=480,
            steps=200_000,
        ),
        cifar=CifarTraining(images=None, batch=512, learning_rate=0.4, model="resnet18", budget_s=60, steps=20_000),
    ),
}


FOLDER_LESSONS: dict[str, FolderLesson] = {
    "smoke": FolderLesson(
        images_per_class=3,
        image_size=(120, 90),
        crop=48,
        store_short_side=56,
        batch=6,
        model="small",
        per_shard=5,
        max_workers=0,
    ),
    "cpu": FolderLesson(
        images_per_class=100,
        image_size=(500, 375),
        crop=224,
        store_short_side=256,
        batch=16,
        model="resnet18",
        per_shard=100,
    ),
    "full": FolderLesson(
        images_per_class=100,
        image_size=(500, 375),
        crop=224,
        store_short_side=256,
        batch=64,
        model="resnet18",
        per_shard=100,
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
