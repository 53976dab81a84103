"""Running a recipe: its planned steps trained with the library's `fit` (a resumed run keeps the plan its checkpoint
was saved with), how the run went against its plan, its score as a sentence, and the training command line:
`python -m helpers.course.train sr|cifar` (also under torchrun)."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

import torch

from ..distributed import (
    DistributedContext,
    cleanup_distributed,
    init_distributed,
    local_main_first,
    wrap_model,
)
from ..env import environment_report, format_environment_report
from ..seeding import rank_seed, seed_everything
from ..step import TrainStep
from ..trainer import fit, saved_run_config
from .data import prepare_bsds300, prepare_cifar10
from .profiles import resolve_profile
from .recipes import Recipe, cifar_recipe, sr_recipe


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


def _seconds(value: float) -> str:
    """Seconds to whole seconds, or to a tenth under 10 s (a smoke run's 0.4 s is not '0 s')."""
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


def run_summary(history: list[dict[str, Any]], recipe: Recipe) -> str:
    """How the run went against its plan: steps trained, seconds, and whether the time cap cut it short."""
    last = history[-1]
    text = f"{last['optimizer_steps']} of {recipe.steps} planned optimizer steps in {_seconds(last['trained_seconds'])}"
    if recipe.expected_s is not None:
        text += f" (calibrated: about {_seconds(recipe.expected_s)})"
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
    """Command line: python -m helpers.course.train sr|cifar [--profile P] [--checkpoint-dir D] [--resume] [--scale S]."""
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
