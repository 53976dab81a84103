"""The command line `python -m helpers.course.bench sr|cifar`: a ladder run side by side in one process, its table printed
and its rows written as JSON with their provenance."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

from ..cifar import load_cifar10
from ..env import environment_report, format_environment_report, resolve_device
from ..seeding import seed_everything
from .data import bsds300_split, prepare_bsds300, prepare_cifar10
from .ladder import LadderRun, ladder_table
from .ladder_cifar import cifar_image_folder, measure_cifar_ladder
from .ladder_sr import measure_sr_ladder
from .profiles import Profile, resolve_profile
from .results import provenance


def _sr_command(args: argparse.Namespace, profile: Profile, device: torch.device) -> tuple[LadderRun, Any]:
    source = prepare_bsds300(progress=False)
    paths = bsds300_split(source.root, "train")
    return measure_sr_ladder(
        paths,
        profile=profile,
        device=device,
        scale=args.scale,
        hr_crop=args.hr_crop,
        batch_size=args.batch_size,
        peers=True,
    ), source


def _cifar_command(args: argparse.Namespace, profile: Profile, device: torch.device) -> tuple[LadderRun, Any]:
    source = prepare_cifar10(progress=False)
    images, labels = load_cifar10(source.root, train=True)
    if profile.cifar_images:
        images, labels = images[: profile.cifar_images], labels[: profile.cifar_images]
    folder = cifar_image_folder(images, labels, source)
    return measure_cifar_ladder(
        images, labels, image_folder=folder, profile=profile, device=device, batch_size=args.batch_size, peers=True
    ), source


def main(argv: list[str] | None = None) -> int:
    """Command line: python -m helpers.course.bench sr|cifar --json PATH [--profile auto|smoke|cpu|full]."""
    parser = argparse.ArgumentParser(description="Run a loader ladder side by side in one process.")
    parser.add_argument("ladder", choices=["sr", "cifar"], help="sr: super-resolution on BSDS300; cifar: CIFAR-10")
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    parser.add_argument("--profile", default="auto", help="auto, smoke, cpu or full (COURSE_PROFILE overrides)")
    parser.add_argument("--scale", type=int, default=4, help="sr: the upscaling factor")
    parser.add_argument("--hr-crop", type=int, default=None, help="sr: HR crop size (default: the profile's)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the profile's")
    args = parser.parse_args(argv)

    profile = resolve_profile(args.profile)
    device = resolve_device()
    seed_everything(0)
    command = _sr_command if args.ladder == "sr" else _cifar_command
    run, source = command(args, profile, device)
    for line in [*run.notes, run.timing]:
        print(line)
    label = f"{'SR' if args.ladder == 'sr' else 'CIFAR'} ladder, {run.label}, {source.name}, profile {profile.name}"
    environment = format_environment_report(environment_report(device))
    print(ladder_table(run.rows, profile.label(f"{label}\n{environment}")))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        rows = [dataclasses.asdict(row) for row in run.rows]  # the rows as the JSON has always had them
        payload = {
            "ladder": args.ladder,
            **provenance(profile=profile.name, device=device, rows=rows),
            "label": label,
            "environment": environment,
            "data": source.describe(),
            "timing": run.timing,
            "rungs": rows,
        }
        args.json.write_text(json.dumps(payload, indent=2))
        print(f"\nwrote {args.json}")
    return 0
