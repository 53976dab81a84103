"""The course's two training runs as thin recipes over the library's trainer, sized by the profile: the SR and the
CIFAR recipe, each with the precision measured for it and a run length calibrated to its time budget (recipe_run.py
trains them)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..augment import CIFAR10_MEAN, CIFAR10_STD, cifar_train_augment, normalize_only
from ..cifar import load_cifar10
from ..distributed import (
    DistributedContext,
)
from ..evaluation import evaluate_classifier, evaluate_sr
from ..images import to_unit_float
from ..loading import DeviceTensorLoader
from ..measure import steps_in_budget
from ..models import build_model, describe_model
from ..precision import PrecisionChoice, fastest_precision, interleaved_times
from ..seeding import rank_seed, seed_everything
from ..sr_cache import CachedCropLoader, DecodedSRCache, DeviceSRCropLoader
from ..sr_data import SREvalDataset
from ..step import TrainStep
from ..trainer import make_scheduler
from .data import bsds300_split, prepare_bsds300, prepare_cifar10
from .profiles import CifarTraining, SRTraining, resolve_profile


@dataclass
class Recipe:
    """Everything one training run needs, built for a profile and a device."""

    task: str
    description: str
    model: nn.Module
    loader: Any
    optimizer: torch.optim.Optimizer
    scheduler: Any
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    evaluate: Callable[[nn.Module], dict[str, Any]]
    epochs: int
    steps: int  # optimizer steps in all, planned from a calibration: the run trains exactly this many
    time_limit_s: float | None  # the cap: a run still short of its steps here stops, and its history says so
    precision: PrecisionChoice
    plan: str  # how the run was sized: the budget, the measured step time and the steps that fit
    data: str
    channels_last: bool = False
    eval_every: int = 1
    expected_s: float | None = None  # the calibration's estimate of the training time (what "about N s" says)
    model_name: str = ""  # build_model(model_name, **model_sizes) makes another network like `model`
    model_sizes: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)  # stored in every checkpoint; a resume must match it

    def fresh_model(self) -> nn.Module:
        """A newly initialised network of this recipe's kind and sizes, on the recipe's device."""
        return build_model(self.model_name, **self.model_sizes).to(next(self.model.parameters()).device)


CAP_FACTOR = 3  # a run is cut at this many times its calibrated time: a busy machine trains the same model, later


def plan_run(
    model: nn.Module,
    example: tuple[torch.Tensor, torch.Tensor],
    *,
    loss_fn: Callable,
    device: torch.device,
    budget_s: float | None,
    max_steps: int,
    channels_last: bool = False,
    context: DistributedContext | None = None,
) -> tuple[PrecisionChoice, int, float, str]:
    """Choose the precision by measurement, then plan the run's work: the number of optimizer steps that fit
    `budget_s` at the calibrated step time (the fastest of the interleaved rounds: the machine's speed with the least
    load on it, so a busy machine trains the same model), and the time those steps should take at the median round. Returns (choice, steps, expected seconds, the plan in words);
    under DDP every rank takes rank 0's plan."""
    choice = fastest_precision(model, example, loss_fn=loss_fn, device=device, channels_last=channels_last)
    low = choice.step_ms_range.get(choice.precision, (0.0, 0.0))[0] / 1000 or _seconds_per_step(
        model, example, loss_fn=loss_fn, device=device, channels_last=channels_last
    )
    typical = choice.step_ms.get(choice.precision, 0.0) / 1000 or low  # the median round: what to expect
    steps = max_steps if budget_s is None else steps_in_budget(budget_s, low, minimum=2, maximum=max_steps)
    why = "fixed in this profile" if budget_s is None else f"what fits a budget of {budget_s:.0f} s"
    cap = " (the profile's most)" if budget_s is not None and steps == max_steps else ""
    words = (
        f"{steps} optimizer steps, {why}{cap} at the fastest calibrated step, {1000 * low:.1f} ms (so that a busy "
        f"machine trains the same model as a quiet one); at the median step, {1000 * typical:.1f} ms, about {steps * typical:.0f} s "
        f"of training; the run trains exactly these steps, cut only past {CAP_FACTOR}x that time (choosing the "
        f"precision cost {choice.cost_s:.1f} s)"
    )
    plan = (choice, steps, steps * typical, words)
    if context is not None and context.enabled:
        shared = [plan]
        dist.broadcast_object_list(shared, src=0)
        plan = shared[0]
    return plan


def _seconds_per_step(
    model: nn.Module,
    example: tuple[torch.Tensor, torch.Tensor],
    *,
    loss_fn: Callable,
    device: torch.device,
    channels_last: bool,
) -> float:
    """The fastest of 3 fp32 training steps on a copy of `model` (the model itself is not trained)."""
    trial = copy.deepcopy(model)
    step = TrainStep(
        trial, torch.optim.SGD(trial.parameters(), lr=1e-6), loss_fn, device=device, channels_last=channels_last
    )
    return min(interleaved_times({"fp32": lambda: step(*example)}, rounds=3, device=device)["fp32"]) / 1000


def _cap(expected_s: float, budget_s: float | None) -> float | None:
    """The time cap of a run planned to take `expected_s`: CAP_FACTOR times it (none for a fixed step count)."""
    return None if budget_s is None else CAP_FACTOR * max(expected_s, 1.0)


def benchmark_fixed_shapes(device: torch.device) -> None:
    """On CUDA, cudnn.benchmark on for a recipe whose training batches all have one shape (fixed crops, CIFAR's 32
    px): cuDNN times its convolution algorithms once per new input shape and keeps the fastest, instead of taking its
    heuristic's choice; the evaluation's few other shapes (a test set's image sizes) are searched once each."""
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True


def sr_recipe(
    profile_name: str,
    device: torch.device,
    *,
    scale: int = 4,
    seed: int = 0,
    context: DistributedContext | None = None,
    sizes: SRTraining | None = None,
) -> Recipe:
    """SmallEDSR on BSDS300-train (or its stand-in) with paired crops from the decoded cache, evaluated on the test
    split (BSD100) by the standard protocol; on CUDA the crops are cut on the device (the zero-CPU pipeline).
    `sizes` replaces the profile's (e.g. `dataclasses.replace(profile.sr, budget_s=300)`)."""
    sizes = sizes or resolve_profile(profile_name).sr
    benchmark_fixed_shapes(device)  # before the calibration below, so it times the step that will run
    source = prepare_bsds300(progress=False)
    cache = DecodedSRCache(bsds300_split(source.root, "train"), scale=scale)
    lr, hr = cache.sample(sizes.batch, hr_crop=sizes.hr_crop, generator=torch.Generator().manual_seed(seed))
    example = (to_unit_float(lr).to(device), to_unit_float(hr).to(device))
    model_sizes = {"scale": scale, "features": sizes.features, "blocks": sizes.blocks}
    precision, total, expected_s, plan = plan_run(
        build_model("small_edsr", **model_sizes).to(device),
        example,
        loss_fn=nn.L1Loss(),
        device=device,
        budget_s=sizes.budget_s,
        max_steps=sizes.steps,
        context=context,
    )
    seed_everything(seed)
    model = build_model("small_edsr", **model_sizes).to(device)
    loader_type = DeviceSRCropLoader if device.type == "cuda" else CachedCropLoader
    rank = context.rank if context is not None else 0
    per_epoch = min(sizes.batches_per_epoch, total)
    # each rank draws its own crops: a different stream per rank, reproducible from one seed
    loader = loader_type(
        cache,
        batch_size=sizes.batch,
        hr_crop=sizes.hr_crop,
        batches_per_epoch=per_epoch,
        seed=rank_seed(seed, rank),
        device=device,
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=sizes.learning_rate, betas=(0.9, 0.99))
    scheduler = make_scheduler(optimizer, kind="onecycle", total_steps=total, peak_learning_rate=sizes.learning_rate)
    test = SREvalDataset(bsds300_split(source.root, "test"), scale=scale)
    return Recipe(
        task="sr",
        description=(
            f"SmallEDSR({sizes.features} features, {sizes.blocks} blocks) x{scale}, {sizes.hr_crop}-px HR crops, "
            f"batch {sizes.batch}, {total} steps, Adam + OneCycle, L1, {precision.precision} on {device}"
        ),
        model=model,
        loader=loader,
        optimizer=optimizer,
        scheduler=scheduler,
        loss_fn=nn.L1Loss(),
        evaluate=lambda m: evaluate_sr(m, test, scale=scale, device=device, context=context),
        epochs=math.ceil(total / per_epoch),
        steps=total,
        time_limit_s=_cap(expected_s, sizes.budget_s),
        precision=precision,
        plan=plan,
        data=source.describe(),
        eval_every=2 if profile_name != "smoke" else 1,
        expected_s=expected_s,
        model_name="small_edsr",
        model_sizes=model_sizes,
        config={
            "recipe": "sr",
            "profile": profile_name,
            "sizes": asdict(sizes),
            "scale": scale,
            "planned_steps": total,
        },
    )


def cifar_recipe(
    profile_name: str,
    device: torch.device,
    *,
    seed: int = 0,
    label_smoothing: float = 0.1,
    context: DistributedContext | None = None,
    sizes: CifarTraining | None = None,
) -> Recipe:
    """ResNet18 (CIFAR stem) on CIFAR-10 (or its stand-in) from a whole-dataset-on-device loader with kornia batch
    augmentation, SGD + OneCycle, label smoothing, the fastest precision measured here; top-1 after each epoch.
    `sizes` replaces the profile's (e.g. `dataclasses.replace(profile.cifar, budget_s=300)`)."""
    sizes = sizes or resolve_profile(profile_name).cifar
    benchmark_fixed_shapes(device)  # before the calibration below, so it times the step that will run
    source = prepare_cifar10(progress=False)
    images, labels = load_cifar10(source.root, train=True)
    test_images, test_labels = load_cifar10(source.root, train=False)
    if sizes.images:
        images, labels = images[: sizes.images], labels[: sizes.images]
        test_images, test_labels = test_images[: sizes.images], test_labels[: sizes.images]
    loss_fn = nn.CrossEntropyLoss(label_smoothing=label_smoothing)
    preprocess = normalize_only(CIFAR10_MEAN, CIFAR10_STD).to(device)  # what cifar_train_augment normalised with
    example = (preprocess(images[: sizes.batch].to(device)), labels[: sizes.batch].to(device))
    precision, total, expected_s, plan = plan_run(
        build_model(sizes.model).to(device),
        example,
        loss_fn=loss_fn,
        device=device,
        budget_s=sizes.budget_s,
        max_steps=sizes.steps,
        channels_last=True,
        context=context,
    )
    seed_everything(seed)
    rank, world_size = (context.rank, context.world_size) if context is not None else (0, 1)
    loader = DeviceTensorLoader(
        images,
        labels,
        batch_size=sizes.batch,
        device=device,
        augment=cifar_train_augment().to(device),
        drop_last=True,
        seed=seed,
        rank=rank,
        world_size=world_size,
    )
    model = build_model(sizes.model).to(device)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=sizes.learning_rate, momentum=0.9, nesterov=True, weight_decay=5e-4
    )
    scheduler = make_scheduler(optimizer, kind="onecycle", total_steps=total, peak_learning_rate=sizes.learning_rate)
    test_images, test_labels = test_images.to(device), test_labels.to(device)
    return Recipe(
        task="cifar",
        description=(
            f"{describe_model(sizes.model)}, {len(images)} images, batch {sizes.batch}, {total} steps "
            f"({total / len(loader):.1f} epochs), SGD + OneCycle (peak {sizes.learning_rate}), label smoothing "
            f"{label_smoothing}, {precision.precision}, channels_last on {device}"
        ),
        model=model,
        loader=loader,
        optimizer=optimizer,
        scheduler=scheduler,
        loss_fn=loss_fn,
        evaluate=lambda m: evaluate_classifier(
            m,
            test_images,
            test_labels,
            preprocess=preprocess,
            device=device,
            precision=precision.precision,
            context=context,
        ),
        epochs=math.ceil(total / len(loader)),
        steps=total,
        time_limit_s=_cap(expected_s, sizes.budget_s),
        precision=precision,
        plan=plan,
        data=source.describe(),
        channels_last=True,
        expected_s=expected_s,
        model_name=sizes.model,
        config={
            "recipe": "cifar",
            "profile": profile_name,
            "sizes": asdict(sizes),
            "label_smoothing": label_smoothing,
            "planned_steps": total,
        },
    )
