"""The course's loader ladders: every rung of a pipeline measured side by side in one process (the loader alone, then
feeding the same model against pre-made batches), the memory of the traditional SR stores, and `python -m
helpers.bench`."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torchvision.datasets import ImageFolder
from tqdm.auto import tqdm

from ..augment import cifar_train_augment
from ..batch_size import batch_that_fits
from ..cifar import cifar10_class_names, load_cifar10
from ..env import environment_report, format_environment_report, resolve_device, usable_cpu_count
from ..images import to_unit_float
from ..loading import DeviceTensorLoader, make_loader
from ..measure import PipelineProbe, count_samples, diagnose_pipeline, seconds_per_call, steps_in_budget
from ..models import ESPCN, SmallConvNet, cifar_resnet18
from ..seeding import seed_everything
from ..sr_cache import PIXEL_BYTES, CachedCropLoader, DecodedSRCache
from ..sr_data import LazyCropSRDataset
from .baselines import (
    InMemoryNaiveSRDataset, NaiveSRDataset, export_image_folder, native_size_transform, seed_post_transform,
)  # fmt: skip
from .cifar_peers import CROP_FLIP_RUNG, FFCV_AHEAD, FFCV_MISSING, FFCV_RUNG, crop_flip_build, ffcv_cifar_build
from .data import bsds300_split, data_root, prepare_bsds300, prepare_cifar10
from .profiles import Profile, resolve_profile
from .sr_formats import png_copies


# --- memory ---------------------------------------------------------------------------------------------------------


def sr_memory_by_scale(paths: list[Path], scales: tuple[int, ...] = (2, 3, 4)) -> list[dict[str, Any]]:
    """Bytes held by the traditional in-memory stores (float32 upscaled LR + HR) and by the uint8 cache, per scale."""
    rows = []
    for scale in scales:
        traditional = InMemoryNaiveSRDataset(paths, scale=scale, hr_crop=scale)
        cache = DecodedSRCache(paths, scale=scale)
        input_bytes = sum(t.numel() * t.element_size() for t in traditional.inputs)
        rows.append(
            {
                "scale": scale,
                "images": len(paths),
                "traditional_mib": traditional.nbytes / 2**20,
                "cache_mib": cache.nbytes / 2**20,
                "total_ratio": traditional.nbytes / cache.nbytes,
                # model inputs: float32 RGB at HR size against the LR's uint8 RGB bytes (padding not counted)
                "input_ratio": input_bytes / (cache.lr_total * 3 // PIXEL_BYTES),
            }
        )
        del traditional, cache
    return rows



# --- the benchmark steps -----------------------------------------------------------------------------------------


def plain_train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
) -> Callable[[Any], float]:
    """A plain fp32 step for benchmarking loaders: takes an (inputs, targets) batch on the device; uint8 tensors are
    made float in [0, 1] here, on the device, as a fast pipeline sends them."""

    def step(batch: Any) -> float:
        inputs, targets = (to_unit_float(t) for t in batch)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    return step


def sr_train_step(model: nn.Module, learning_rate: float = 1e-4) -> Callable[[Any], float]:
    """The SR benchmark step: L1 loss, Adam."""
    return plain_train_step(model, torch.optim.Adam(model.parameters(), lr=learning_rate), nn.L1Loss())


def classification_train_step(model: nn.Module, learning_rate: float = 0.05) -> Callable[[Any], float]:
    """The classification benchmark step: cross-entropy, SGD with momentum."""
    return plain_train_step(model, torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=0.9), nn.CrossEntropyLoss())



# --- ladders -------------------------------------------------------------------------------------------------------


MIN_ROUNDS = 3  # rounds a ladder always runs, past its budget if need be: one round has no spread to read


@dataclass
class Rung:
    """One rung of a loader ladder: a name, how to build its loader, the model its batches feed, and its step."""

    name: str
    build: Callable[[], Iterable]
    model: Callable[[], nn.Module]
    workers: int = 0
    make_step: Callable[[nn.Module], Callable[[Any], Any]] = sr_train_step
    model_note: str = ""  # set when this rung's model differs from the others' (its fed rate is not like for like)
    prefetched: int = 0  # batches its loader may hold ready between turns (workers x prefetch): drained untimed


@dataclass
class _Turn:
    """A built rung and how many batches / steps one of its turns times."""

    rung: Rung
    probe: PipelineProbe
    loader_batches: int = 1
    steps: int = 1


def _build(rung: Rung, device: torch.device, turn_s: float) -> _Turn:
    """Build a rung's loader and model, warm them up, and size its turn to about `turn_s` seconds (at least one
    loader batch and one fed and one pre-made step: a rung slower than that takes longer, and the round count gives)."""
    torch.manual_seed(0)
    probe = PipelineProbe(rung.build(), rung.make_step(rung.model().to(device)), device, premade=2,
                          warmup=max(1, rung.workers))  # fmt: skip
    for _ in range(rung.prefetched):  # batches its workers made ahead would make the loader look instant
        next(probe.source)
    seconds_per_batch = 2 / probe.loader_block(2) * count_samples(probe.batches[0])
    probe.alone.clear()
    return _Turn(rung, probe, steps_in_budget(turn_s / 3, seconds_per_batch, maximum=200),
                 steps_in_budget(2 * turn_s / 3, probe.seconds_per_pair(), maximum=100))  # fmt: skip


def _take_turn(turn: _Turn) -> None:
    for _ in range(turn.rung.prefetched):  # batches made while other rungs ran are not this turn's work
        next(turn.probe.source)
    turn.probe.loader_block(turn.loader_batches)
    turn.probe.fed_block(turn.steps)
    turn.probe.premade_block(turn.steps)


def run_ladder(
    rungs: list[Rung], *, device: torch.device, rounds: int, turn_s: float
) -> tuple[list[dict[str, Any]], str]:
    """Measure every rung side by side: all rungs are built, then up to `rounds` rounds give each rung a turn of about
    `turn_s` seconds (the loader alone, then fed and pre-made steps), the order rotating each round. A burst of load
    on the machine therefore hits every rung alike; each number is a median over rounds, with its range. After the
    first `MIN_ROUNDS` rounds (a range needs several), rounds stop once the next one would pass the budget
    (rounds x rungs x turn_s). Returns the rows and a line saying how long building and measuring took."""
    started = time.perf_counter()
    turns = [_build(rung, device, turn_s) for rung in tqdm(rungs, desc="building rungs", unit="rung")]
    built, budget, done = time.perf_counter(), rounds * len(rungs) * turn_s, 0
    with tqdm(total=rounds * len(turns), desc="ladder rounds", unit="turn") as bar:
        while done < rounds and (done < MIN_ROUNDS or (time.perf_counter() - built) * (done + 1) / done <= budget):
            for turn in turns[done % len(turns):] + turns[: done % len(turns)]:
                _take_turn(turn)
                bar.update(1)
            done += 1
    rows = [_row(turn) for turn in turns]
    for turn in turns:
        cleanup = getattr(getattr(turn.probe.source.loader, "dataset", None), "cleanup", None)
        if callable(cleanup):
            cleanup()
    for row in rows:
        row["speedup_vs_first"] = row["samples_per_s"] / rows[0]["samples_per_s"]
    timing = (f"building and warming up the rungs took {built - started:.0f} s; {done} of {rounds} rounds took "
              f"{time.perf_counter() - built:.0f} s (budget {budget:.0f} s)")  # fmt: skip
    return rows, timing


def _row(turn: _Turn) -> dict[str, Any]:
    fed = turn.probe.result()
    alone = [n / t for t, n in turn.probe.alone]
    return {
        "name": turn.rung.name,
        "model_note": turn.rung.model_note,
        "samples_per_s": statistics.median(alone),
        "samples_per_s_range": (min(alone), max(alone)),
        "fed_samples_per_s": statistics.median([n / t for t, n in turn.probe.fed]),
        "ideal_samples_per_s": statistics.median([n / t for t, n in turn.probe.ideal]),
        "pipeline_efficiency": fed.pipeline_efficiency,
        "efficiency_range": fed.efficiency_range,
        "data_wait_ms": fed.data_wait_ms,
        "compute_ms": fed.compute_ms,
        "premade_step_ms": fed.premade_step_ms,
        "rounds": len(alone),
        "steps_per_turn": turn.steps,
        "peak_device_mib": fed.peak_device_mib,
        "doctor": diagnose_pipeline(fed, num_workers=turn.rung.workers, cpu_cores=usable_cpu_count()).splitlines()[0],
    }


def ladder_table(rows: list[dict[str, Any]], label: str = "") -> str:
    """A markdown table of a ladder's rows: medians over rounds with their ranges; rungs with another model marked."""
    lines = [
        f"{label}\n" if label else "",
        "| rung | loader alone, samples/s | × first | fed end to end, samples/s | pre-made, samples/s | efficiency "
        "| data-wait ms | step ms, fed / pre-made |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        low, high = r["samples_per_s_range"]
        e_low, e_high = r["efficiency_range"]
        mark = " †" if r["model_note"] else ""
        lines.append(
            f"| {r['name']}{mark} | {r['samples_per_s']:.0f} ({low:.0f}–{high:.0f}) | {r['speedup_vs_first']:.1f} | "
            f"{r['fed_samples_per_s']:.0f} | {r['ideal_samples_per_s']:.0f} | {r['pipeline_efficiency']:.2f} "
            f"({e_low:.2f}–{e_high:.2f}) | {r['data_wait_ms']:.1f} | {r['compute_ms']:.1f} / {r['premade_step_ms']:.1f} |"
        )
    notes = sorted({r["model_note"] for r in rows if r["model_note"]})
    lines += [f"\n† {note}" for note in notes]
    lines.append(f"\nmedians over {rows[0]['rounds']} interleaved rounds (range in brackets)")
    return "\n".join(lines)


def sr_ladder(
    paths: list[Path],
    *,
    device: torch.device,
    batch_size: int,
    scale: int = 4,
    hr_crop: int = 128,
    workers: int = 2,
    seed: int = 0,
    samples_per_epoch: int = 4096,
) -> list[Rung]:
    """The SR ladder's rungs: traditional from disk and in memory, lazy crop plain and tuned, decoded uint8 cache."""
    pin = device.type == "cuda"
    common = {"seed": seed, "samples_per_epoch": samples_per_epoch, "pin_memory": pin}

    def naive_disk():
        return make_loader(NaiveSRDataset(paths, scale=scale, hr_crop=hr_crop, seed=seed), batch_size, **common)

    def naive_memory():
        return make_loader(InMemoryNaiveSRDataset(paths, scale=scale, hr_crop=hr_crop, seed=seed), batch_size, **common)

    def lazy_plain():
        return make_loader(LazyCropSRDataset(paths, scale=scale, hr_crop=hr_crop, seed=seed), batch_size, **common)

    def lazy_tuned():
        dataset = LazyCropSRDataset(paths, scale=scale, hr_crop=hr_crop, seed=seed)
        return make_loader(
            dataset, batch_size, num_workers=workers, prefetch_factor=4, persistent_workers=True, **common
        )

    def cached():  # uint8 all the way to the device; the step makes it float there
        cache = DecodedSRCache(paths, scale=scale)
        return CachedCropLoader(cache, batch_size=batch_size, hr_crop=hr_crop, batches_per_epoch=10**6, seed=seed,
                                device=device, as_float=False)  # fmt: skip

    def upscaled_input_model():
        return ESPCN(scale=1)  # the same network on pre-upscaled inputs: 16x the pixels at x4

    def lr_input_model():
        return ESPCN(scale=scale)

    hr_model = (f"ESPCN on pre-upscaled HR-size inputs: {scale * scale}x the pixels of the other rungs' model, so "
                "its fed rate and efficiency are not like for like")  # fmt: skip
    return [
        Rung("naive: pre-upscaled files from disk (seed's traditional way)", naive_disk, upscaled_input_model,
             model_note=hr_model),
        Rung("naive: pre-upscaled float tensors in memory", naive_memory, upscaled_input_model, model_note=hr_model),
        Rung("lazy crop, num_workers=0", lazy_plain, lr_input_model),
        Rung(f"lazy crop, {workers} workers, prefetch 4, persistent", lazy_tuned, lr_input_model, workers,
             prefetched=4 * workers),
        Rung("decoded uint8 cache, batch crops (uint8 out: the step makes it float)", cached, lr_input_model),
    ]  # fmt: skip


def seed_post_batch(
    model: Callable[[], nn.Module], *, device: torch.device, wanted: int, step_s: float | None = None
) -> tuple[int, str]:
    """The batch the post's 224-px pipeline can train at here: one step measured, scaled to the free memory (halved
    on a CUDA out-of-memory error) and, with `step_s`, to a step of at most that many seconds."""
    torch.manual_seed(0)
    step = classification_train_step(model().to(device))

    def run(batch: int) -> None:
        images = torch.randn(batch, 3, 224, 224, device=device)
        step((images, torch.randint(0, 10, (batch,), device=device)))

    batch, why = batch_that_fits(run, wanted=wanted, device=device)
    if step_s is not None:
        per_image = seconds_per_call(lambda: run(2), calls=1, device=device) / 2
        if per_image * batch > step_s:
            batch = max(1, int(step_s / per_image))
            why += f"; {per_image:.2f} s per image per step, so batch {batch} for steps of about {step_s:.2g} s"
    return batch, why


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
) -> list[Rung]:
    """The classification ladder: the seed post's ImageFolder + PIL pipeline at 224 px (batch `seed_batch`, what
    fits in memory), the same family at 32 px, and the whole dataset as one uint8 tensor on the device with kornia
    batch augmentation (with and without)."""
    pin = device.type == "cuda"
    samples = 10**6  # an epoch long enough that no measurement restarts the workers
    seed_workers = min(4, max(1, workers))  # the post's num_workers=4, capped by the cores here

    def seed_post():
        dataset = ImageFolder(str(image_folder), transform=seed_post_transform())
        return make_loader(dataset, seed_batch, seed=seed, num_workers=seed_workers, pin_memory=pin,
                           persistent_workers=True, samples_per_epoch=samples)  # fmt: skip

    def native_pil():
        dataset = ImageFolder(str(image_folder), transform=native_size_transform())
        return make_loader(dataset, batch_size, seed=seed, num_workers=seed_workers, pin_memory=pin,
                           persistent_workers=True, samples_per_epoch=samples)  # fmt: skip

    def on_device(augment: bool):
        def build():
            transform = cifar_train_augment().to(device) if augment else None
            return DeviceTensorLoader(images, labels, batch_size=batch_size, device=device, augment=transform,
                                      drop_last=True, seed=seed)  # fmt: skip

        return build

    capped = " (the post's 4, capped at the cores here)" if seed_workers < 4 else ""
    return [
        Rung(f"seed post: ImageFolder PNG + PIL per sample, RandomResizedCrop(224), {seed_workers} workers{capped}, "
             f"batch {seed_batch}", seed_post, model, seed_workers, classification_train_step, prefetched=2 * seed_workers,
             model_note="the same network on 224-px crops: (224/32)^2 = 49x the pixels of a 32-px image"),
        Rung(f"ImageFolder PNG + PIL per sample at 32 px (crop, flip, jitter, grayscale), {seed_workers} workers",
             native_pil, model, seed_workers, classification_train_step, prefetched=2 * seed_workers),
        Rung("whole dataset as uint8 on the device + kornia batch augmentation (crop, flip, jitter, grayscale)",
             on_device(True), model, 0, classification_train_step),
        Rung("whole dataset as uint8 on the device, no augmentation (the ceiling)", on_device(False), model, 0,
             classification_train_step),
    ]  # fmt: skip


# --- the command line: python -m helpers.bench -------------------------------------------------------------------


def _sr_command(args: argparse.Namespace, profile: Profile, device: torch.device) -> tuple[list[dict[str, Any]], str, str]:
    source = prepare_bsds300(progress=False)
    paths = bsds300_split(source.root, "train")
    batch_size = args.batch_size or 16
    workers = max(1, min(8, usable_cpu_count()))
    rungs = sr_ladder(paths, device=device, batch_size=batch_size, scale=args.scale, hr_crop=args.hr_crop,
                      workers=workers)  # fmt: skip
    # the file format's part: the lazy-crop loader with the same workers on lossless PNG copies of the same images
    pngs = png_copies(paths, data_root() / "png-copies" / f"{source.root.name}-train-{len(paths)}")
    png_plain = sr_ladder(pngs, device=device, batch_size=batch_size, scale=args.scale, hr_crop=args.hr_crop,
                          workers=workers)[3]  # fmt: skip
    png_plain.name = png_plain.name.replace("lazy crop", "lazy crop on PNG copies of the same images")
    rungs.insert(4, png_plain)
    rows, timing = run_ladder(rungs, device=device, rounds=profile.ladder_rounds, turn_s=profile.ladder_turn_s)
    print(timing)
    label = (
        f"SR ladder, x{args.scale}, {args.hr_crop}-px HR crops, batch {batch_size}, {len(paths)} images of "
        f"{source.name}, ESPCN training step, profile {profile.name}"
    )
    return rows, label, source.describe()


def _cifar_command(args: argparse.Namespace, profile: Profile, device: torch.device) -> tuple[list[dict[str, Any]], str, str]:
    source = prepare_cifar10(progress=False)
    images, labels = load_cifar10(source.root, train=True)
    if profile.cifar_images:
        images, labels = images[: profile.cifar_images], labels[: profile.cifar_images]
    slug = "standin" if source.is_standin else "cifar10"
    folder = export_image_folder(images, labels, class_names=cifar10_class_names(source.root),
                                 dest=data_root() / "imagefolder" / f"{slug}-{len(images)}")  # fmt: skip
    use_resnet = profile.cifar_ladder_model == "resnet18"
    batch_size = args.batch_size or profile.cifar_ladder_batch
    model = cifar_resnet18 if use_resnet else (lambda: SmallConvNet(width=16))
    seed_batch, why = seed_post_batch(model, device=device, wanted=batch_size, step_s=profile.ladder_turn_s / 3)
    print(f"the post's 224-px rung: {why}")
    rungs = cifar_ladder(images, labels, image_folder=folder, device=device, batch_size=batch_size,
                         seed_batch=seed_batch, model=model, workers=max(1, usable_cpu_count()))  # fmt: skip
    # the bench's peers: the shipped crop + flip configuration, and FFCV doing the same work where it is installed
    rungs.insert(-1, Rung(CROP_FLIP_RUNG, crop_flip_build(images, labels, device=device, batch_size=batch_size), model,
                          0, classification_train_step))  # fmt: skip
    ffcv = ffcv_cifar_build(images, labels, dest=data_root() / "ffcv" / f"{slug}-{len(images)}.beton", device=device,
                            batch_size=batch_size, workers=max(1, usable_cpu_count()))  # fmt: skip
    if ffcv is None:
        print(f"FFCV: no row ({FFCV_MISSING}; pip install ffcv, with OpenCV and libjpeg-turbo development files)")
    else:
        rungs.insert(-1, Rung(FFCV_RUNG, ffcv, model, 0, classification_train_step, prefetched=FFCV_AHEAD + 1))
    rows, timing = run_ladder(rungs, device=device, rounds=profile.ladder_rounds, turn_s=profile.ladder_turn_s)
    print(timing)
    label = (
        f"CIFAR ladder, batch {batch_size}, {len(images)} images of {source.name}, "
        f"{'ResNet18 (CIFAR stem)' if use_resnet else 'small CNN (width 16)'} training step, profile {profile.name}"
    )
    return rows, label, source.describe()


def main(argv: list[str] | None = None) -> int:
    """Command line: python -m helpers.bench sr|cifar --json PATH [--profile auto|smoke|cpu|full]."""
    parser = argparse.ArgumentParser(description="Run a loader ladder side by side in one process.")
    parser.add_argument("ladder", choices=["sr", "cifar"], help="sr: super-resolution on BSDS300; cifar: CIFAR-10")
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    parser.add_argument("--profile", default="auto", help="auto, smoke, cpu or full (COURSE_PROFILE overrides)")
    parser.add_argument("--scale", type=int, default=4, help="sr: the upscaling factor")
    parser.add_argument("--hr-crop", type=int, default=128, help="sr: HR crop size")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 16 for sr, the profile's for cifar")
    args = parser.parse_args(argv)

    profile = resolve_profile(args.profile)
    device = resolve_device()
    seed_everything(0)
    command = _sr_command if args.ladder == "sr" else _cifar_command
    rows, label, data = command(args, profile, device)
    environment = format_environment_report(environment_report(device))
    print(ladder_table(rows, profile.label(f"{label}\n{environment}")))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"ladder": args.ladder, "profile": profile.name, "device": str(device), "label": label,
                   "environment": environment, "data": data, "rungs": rows}  # fmt: skip
        args.json.write_text(json.dumps(payload, indent=2))
        print(f"\nwrote {args.json}")
    return 0
