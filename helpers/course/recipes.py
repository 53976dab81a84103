"""The course's two training runs as thin recipes over the library's trainer, sized by the profile, and the training
command line: `python -m helpers.course.train sr|cifar` (also under torchrun)."""

from __future__ import annotations

import argparse
import copy
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..augment import CIFAR10_MEAN, CIFAR10_STD, cifar_train_augment, normalize_only
from ..cifar import load_cifar10
from ..distributed import (
    DistributedContext,
    cleanup_distributed,
    init_distributed,
    local_main_first,
    wrap_model,
)
from ..env import environment_report, format_environment_report
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
from ..trainer import fit, make_scheduler, saved_run_config
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
        f"{steps} optimizer steps, {why}{cap} at the fastest calibrated step, {1000 * low:.1f} ms (so the same "
        f"model on a busy machine); at the median step, {1000 * typical:.1f} ms, about {steps * typical:.0f} s "
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


def _resumed_plan(recipe: Recipe, folder: str | os.PathLike | None) -> tuple[str, dict[str, Any]]:
    """The precision and run configuration to train with: a resumed run keeps the ones its checkpoint was saved with
    (its measured precision and planned steps), so that a new calibration cannot make it refuse its own checkpoint."""
    config, precision = dict(recipe.config), recipe.precision.precision
    saved = saved_run_config(folder) if folder is not None else None
    if saved is not None and {k: saved.get(k) for k in ("recipe", "profile", "sizes")} == {
        k: config.get(k) for k in ("recipe", "profile", "sizes")
    }:
        config["planned_steps"], precision = saved.get("planned_steps", recipe.steps), saved.get("precision", precision)
        recipe.steps = int(config["planned_steps"])
        recipe.epochs = math.ceil(recipe.steps / max(len(recipe.loader), 1))
    return precision, config


def run_recipe(
    recipe: Recipe,
    *,
    checkpoint_dir: str | os.PathLike | None = None,
    resume: bool = False,
    progress: bool = True,
    context: DistributedContext | None = None,
) -> list[dict[str, Any]]:
    """Train a recipe's planned steps with the library's `fit` (checkpoints and history in `checkpoint_dir`, each
    with the recipe's configuration; DDP with `context`); the last record's `time_capped` says whether the cap cut
    it."""
    precision, config = _resumed_plan(recipe, checkpoint_dir if resume else None)
    if recipe.channels_last:  # before DDP is built: DDP's gradient buckets follow the parameters' strides
        recipe.model.to(memory_format=torch.channels_last)
    model = wrap_model(recipe.model, context) if context is not None else recipe.model
    device = next(recipe.model.parameters()).device
    step = TrainStep(
        model,
        recipe.optimizer,
        recipe.loss_fn,
        device=device,
        precision=precision,
        channels_last=recipe.channels_last,
        scheduler=recipe.scheduler,
    )
    return fit(
        model,
        recipe.loader,
        step,
        epochs=recipe.epochs,
        scheduler=recipe.scheduler,
        evaluate=recipe.evaluate,
        eval_every=recipe.eval_every,
        checkpoint_dir=checkpoint_dir,
        resume=resume,
        max_steps=recipe.steps,
        time_limit_s=recipe.time_limit_s,
        progress=progress,
        context=context,
        run=config,
    )


def run_summary(history: list[dict[str, Any]], recipe: Recipe) -> str:
    """How the run went against its plan: steps trained, seconds, and whether the time cap cut it short."""
    last = history[-1]
    text = f"{last['optimizer_steps']} of {recipe.steps} planned optimizer steps in {last['trained_seconds']:.0f} s"
    if recipe.expected_s is not None:
        text += f" (calibrated: about {recipe.expected_s:.0f} s)"
    if last.get("time_capped"):
        text += (
            f"; CUT BY THE TIME CAP of {recipe.time_limit_s:.0f} s before its planned steps: the score below is "
            "of a shorter run than planned (the machine was slower than calibrated)"
        )
    return text


def result_sentence(last: dict[str, Any], *, task: str) -> str:
    """The run's score as a sentence, against what it means: PSNR-Y over the bicubic baseline, or top-1 over chance."""
    loss = f"final training loss {float(last['train_loss']):.3f}"
    if task == "sr":
        gain = last["psnr_y"] - last["bicubic_psnr_y"] if "bicubic_psnr_y" in last else None
        against = f", {gain:+.2f} dB against MATLAB's bicubic" if gain is not None else ""
        return f"PSNR-Y {last['psnr_y']:.2f} dB on the test images{against}; {loss}"
    top1, chance = last["top1"], 0.1
    relation = "above" if top1 > chance + 0.05 else "below" if top1 < chance - 0.05 else "about"
    return f"top-1 {top1:.1%} on the held-out images, {relation} the {chance:.0%} of chance (10 classes); {loss}"


def main(argv: list[str] | None = None) -> int:
    """Command line: python -m helpers.course.train sr|cifar [--profile P] [--checkpoint-dir D] [--resume] [--scale
    S]."""
    parser = argparse.ArgumentParser(
        description="Train the course's SR or CIFAR model outside the notebooks (single process, or under torchrun)."
    )
    parser.add_argument("task", choices=["sr", "cifar"])
    parser.add_argument("--profile", default="auto", help="auto, smoke, cpu or full (COURSE_PROFILE overrides)")
    parser.add_argument("--checkpoint-dir", type=Path, default=None, help="default: runs/<task>-<profile>")
    parser.add_argument("--resume", action="store_true", help="continue from <checkpoint-dir>/last.pt")
    parser.add_argument("--scale", type=int, default=4, help="sr: 2, 3 or 4")
    args = parser.parse_args(argv)

    profile = resolve_profile(args.profile)
    context = init_distributed()
    device = context.device
    with local_main_first(context):  # one process per node downloads and writes data; the others then read it
        (prepare_bsds300 if args.task == "sr" else prepare_cifar10)(progress=False)
    if args.task == "sr":  # every rank together: choosing the precision is a collective under DDP
        recipe = sr_recipe(profile.name, device, scale=args.scale, context=context)
    else:
        recipe = cifar_recipe(profile.name, device, context=context)
    seed_everything(rank_seed(0, context.rank))  # per-rank augmentation draws, reproducible
    folder = args.checkpoint_dir or Path("runs") / f"{args.task}-{profile.name}"
    say = print if context.is_main else (lambda *a, **k: None)
    say(profile.label(recipe.description))
    say(f"precision: {recipe.precision.reason}")
    say(f"run length: {recipe.plan}")
    say(recipe.data)
    say(format_environment_report(environment_report(device)) + f" | {context.world_size} process(es)")
    failed = True  # until the run returns: a rank that raised or was interrupted leaves without a barrier
    try:
        history = run_recipe(recipe, checkpoint_dir=folder, resume=args.resume, context=context)
        failed = False
    except KeyboardInterrupt:
        say(f"\ninterrupted: checkpoint in {folder / 'last.pt'}; continue with --resume")
        return 130
    finally:
        cleanup_distributed(failed=failed)
    say(profile.label(f"after {run_summary(history, recipe)}: {result_sentence(history[-1], task=args.task)}"))
    if profile.is_smoke:
        say(
            "a smoke run trains a few steps to show that the command, the data and every rank work; its score says "
            "nothing about what the model learns (run --profile cpu or full for that)"
        )
    say(f"history: {folder / 'history.json'}; checkpoint: {folder / 'last.pt'}")
    return 0
