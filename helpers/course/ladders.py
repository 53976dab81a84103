"""The course's loader ladders: every rung of a pipeline measured side by side in one process (the loader alone, then
feeding the same model against pre-made batches), the memory of the traditional SR stores, and `python -m
helpers.course.bench`."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
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

from ..augment import NormalizeToFloat, cifar_train_augment
from ..batch_size import batch_for_step_time, batch_that_fits
from ..cifar import cifar10_class_names, load_cifar10
from ..doctor import diagnose_pipeline
from ..env import environment_report, format_environment_report, resolve_device, usable_cpu_count
from ..images import to_unit_float
from ..loading import DeviceTensorLoader, make_loader
from ..loadmeter import busy_cores, cpu_budget, intra_op_threads
from ..measure import PipelineProbe, seconds_per_call, steps_in_budget
from ..memory import allocated_device_memory_bytes
from ..models import ESPCN, build_model, describe_model
from ..seeding import seed_everything
from ..sr_cache import PIXEL_BYTES, CachedCropLoader, DecodedSRCache
from ..sr_data import LazyCropSRDataset
from .baselines import (
    InMemoryNaiveSRDataset,
    NaiveSRDataset,
    export_image_folder,
    native_size_transform,
    seed_post_transform,
)
from .cifar_peers import CROP_FLIP_RUNG, FFCV_AHEAD, FFCV_MISSING, FFCV_RUNG, crop_flip_build, ffcv_cifar_build
from .data import bsds300_split, data_root, prepare_bsds300, prepare_cifar10
from .profiles import Profile, resolve_profile
from .results import provenance
from .sr_formats import png_copies
from .verdicts import busy_summary, by_role, efficiency_cell  # noqa: F401 (by_role: ladders are read by role)

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
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    memory_format: torch.memory_format = torch.contiguous_format,
) -> Callable[[Any], float]:
    """A plain fp32 step for benchmarking loaders: takes an (inputs, targets) batch on the device; uint8 tensors are
    made float in [0, 1] here, on the device, as a fast pipeline sends them, and image batches are put in
    `memory_format` (a no-op when they arrive in it). Every rung's batches thus reach the model in one layout: the
    decoded cache's RGBX crops are channels-last-strided, a PIL loader's NCHW, and a step on another layout runs at
    another speed, which made rungs of the same model measure different pre-made baselines."""

    def layout(tensor: torch.Tensor) -> torch.Tensor:
        tensor = to_unit_float(tensor)
        return tensor.contiguous(memory_format=memory_format) if tensor.ndim == 4 else tensor

    def step(batch: Any) -> float:
        inputs, targets = (layout(t) for t in batch)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    return step


def sr_train_step(model: nn.Module, learning_rate: float = 1e-4) -> Callable[[Any], float]:
    """The SR benchmark step: L1 loss, Adam, images in the contiguous NCHW layout whichever layout a rung sends."""
    return plain_train_step(model, torch.optim.Adam(model.parameters(), lr=learning_rate), nn.L1Loss())


def classification_train_step(model: nn.Module, learning_rate: float = 0.05) -> Callable[[Any], float]:
    """The classification benchmark step: cross-entropy, SGD with momentum, images in channels_last (the layout the
    on-device rungs' NormalizeToFloat hands over; the PIL rungs' NCHW batches are converted in the step)."""
    return plain_train_step(
        model,
        torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=0.9),
        nn.CrossEntropyLoss(),
        torch.channels_last,
    )


# --- ladders -------------------------------------------------------------------------------------------------------


MIN_ROUNDS = 3  # rounds a ladder always runs, past its budget if need be: one round has no spread to read


@dataclass
class Rung:
    """One rung of a loader ladder: a name, how to build its loader, the model its batches feed, and its step.

    `role` is what verdicts look the rung up by ("seed post", "native size", "device", "ceiling", ...), so an
    inserted rung cannot make a verdict compare the wrong loaders; a ceiling names in `bounds` the role it bounds.
    """

    name: str
    build: Callable[[], Iterable]
    model: Callable[[], nn.Module]
    workers: int = 0
    make_step: Callable[[nn.Module], Callable[[Any], Any]] = sr_train_step
    model_note: str = ""  # set when this rung's model differs from the others' (its fed rate is not like for like)
    prefetched: int | None = None  # batches drained untimed at each turn's start (None or 0: what its workers hold)
    role: str = ""
    bounds: str = ""


@dataclass
class _Turn:
    """A built rung, how many batches / steps one of its turns times, and its intra-op threads."""

    rung: Rung
    probe: PipelineProbe
    loader_batches: int = 1
    steps: int = 1
    threads: int = 1
    resident_bytes: int | None = None  # CUDA: what building the rung left allocated (model, optimizer, data, batches)


def _build(rung: Rung, device: torch.device, turn_s: float, cores: int, busy: int = 0) -> _Turn:
    """Build a rung's loader and model, warm them up, and size its turn to about `turn_s` seconds (at least one
    loader batch and one fed and one pre-made step: a rung slower than that takes longer, and the round count gives).
    Its workers are shut down until its first turn."""
    threads = _rung_threads(rung, cores, busy)
    torch.manual_seed(0)
    before = allocated_device_memory_bytes(device)  # the rungs built earlier, and anything else held already
    with intra_op_threads(threads):
        probe = PipelineProbe(
            rung.build(), rung.make_step(rung.model().to(device)), device, premade=2, warmup=max(1, rung.workers)
        )
        probe.drain(rung.prefetched or None)  # batches its workers made ahead would make the loader look instant
        seconds_per_batch = 2 / probe.loader_block(2) * probe.batch_samples
        probe.forget(loader=True)
        turn = _Turn(
            rung,
            probe,
            steps_in_budget(turn_s / 3, seconds_per_batch, maximum=200),
            steps_in_budget(2 * turn_s / 3, probe.seconds_per_pair(), maximum=100),
            threads,
        )
    probe.pause()
    if before is not None:
        turn.resident_bytes = (allocated_device_memory_bytes(device) or 0) - before
    return turn


def _peak_device_mib(turn: _Turn) -> float | None:
    """A rung's own peak device memory: what it holds (built) plus the most its turns' blocks allocated beyond what
    was held when each started; not the process's peak (another rung's, or the 224-px batch search's)."""
    if turn.resident_bytes is None:  # off CUDA
        return None
    above = turn.probe.peak_above_start_bytes()
    return None if above is None else (turn.resident_bytes + above) / 2**20


def _take_turn(turn: _Turn) -> None:
    """One turn: the rung's workers restarted untimed, its blocks timed with its thread budget, its workers stopped,
    so that no other rung's worker processes share the cores while a turn is timed."""
    with intra_op_threads(turn.threads):
        turn.probe.drain(turn.rung.prefetched or None)  # 0 (the old default) too: restarted workers need a draw
        turn.probe.loader_block(turn.loader_batches)
        turn.probe.fed_block(turn.steps)
        turn.probe.premade_block(turn.steps)
    turn.probe.pause()


def _rung_threads(rung: Rung, cores: int, busy: int) -> int:
    """A rung's intra-op threads: the cores its workers and other processes' busy cores leave (at least one)."""
    return cpu_budget(rung.workers, cores, busy)[1]


def cpu_budget_text(rungs: list[Rung], cores: int, busy: int = 0) -> str:
    """The CPU budget each rung is measured under: its workers plus the timed process's intra-op threads, less the
    `busy` cores other processes kept busy when the ladder started."""
    parts = [
        f"'{r.name}' {r.workers} worker{'s' * (r.workers != 1)} + {_rung_threads(r, cores, busy)} intra-op "
        f"thread{'s' * (_rung_threads(r, cores, busy) != 1)}"
        for r in rungs
    ]
    others = f", {busy} of them kept busy by other processes when the ladder started" if busy else ""
    return f"CPU budget on {cores} cores{others} (workers + the timed process's intra-op threads): " + "; ".join(parts)


def run_ladder(
    rungs: list[Rung], *, device: torch.device, rounds: int, turn_s: float, busy: int | None = None
) -> tuple[list[dict[str, Any]], str]:
    """Measure every rung side by side: all rungs are built, then up to `rounds` rounds give each rung a turn of about
    `turn_s` seconds (the loader alone, then fed and pre-made steps), the order rotating each round. A burst of load
    on the machine therefore hits every rung alike; each number is a median over rounds, with its range. After the
    first `MIN_ROUNDS` rounds (a range needs several), rounds stop once the next one would pass the budget
    (rounds x rungs x turn_s). Only the rung whose turn it is has live workers, with the intra-op threads its workers
    leave, less the cores other processes keep busy (`busy`, measured now when not given). Returns the rows and lines
    saying the CPU budget and how long building and measuring took."""
    started, cores = time.perf_counter(), usable_cpu_count()
    busy = busy_cores() if busy is None else busy
    turns = [_build(rung, device, turn_s, cores, busy) for rung in tqdm(rungs, desc="building rungs", unit="rung")]
    built, budget, done = time.perf_counter(), rounds * len(rungs) * turn_s, 0
    try:
        with tqdm(total=rounds * len(turns), desc="ladder rounds", unit="turn") as bar:
            while done < rounds and (done < MIN_ROUNDS or (time.perf_counter() - built) * (done + 1) / done <= budget):
                for turn in turns[done % len(turns) :] + turns[: done % len(turns)]:
                    _take_turn(turn)
                    bar.update(1)
                done += 1
            bar.total = bar.n  # rounds that stopped at the budget end the bar where it stands, not part-way
            bar.refresh()
        rows = [_row(turn, cores) for turn in turns]
    finally:
        for turn in turns:
            turn.probe.close()
    for row in rows:
        row["loader_vs_first"] = row["loader_samples_per_s"] / rows[0]["loader_samples_per_s"]
    timing = (
        f"{cpu_budget_text(rungs, cores, busy)}\nbuilding and warming up the rungs took {built - started:.0f} s; "
        f"{done} of {rounds} rounds took {time.perf_counter() - built:.0f} s (budget {budget:.0f} s)"
    )
    return rows, timing


def _median_and_range(values: list[float]) -> tuple[float, tuple[float, float]]:
    return statistics.median(values), (min(values), max(values))


def _efficiency(fed: float, premade: float, per_round: tuple[float, float]) -> tuple[float, tuple[float, float]]:
    """A rung's efficiency as its table prints it: the fed median over the pre-made median (the two columns beside
    it, so dividing them gives it), with the range of the per-round ratios (each round's fed block over its own
    pre-made block), widened to the ratio of the medians in the rare case it falls outside them."""
    ratio = fed / premade
    return ratio, (min(per_round[0], ratio), max(per_round[1], ratio))


def _row(turn: _Turn, cores: int) -> dict[str, Any]:
    probe, fed = turn.probe, turn.probe.result()
    alone, alone_range = _median_and_range(probe.rates("alone"))
    fed_rate, fed_range = _median_and_range(probe.rates("fed"))
    premade, premade_range = _median_and_range(probe.rates("premade"))
    efficiency, efficiency_range = _efficiency(fed_rate, premade, fed.efficiency_range or (fed_rate / premade,) * 2)
    busy = fed.load is not None and fed.load.busy
    # the doctor reads the efficiency the table prints (fed median over pre-made median), not a second one
    as_printed = dataclasses.replace(fed, pipeline_efficiency=efficiency, efficiency_range=efficiency_range)
    return {
        "name": turn.rung.name,
        "role": turn.rung.role,
        "bounds": turn.rung.bounds,
        "model_note": turn.rung.model_note,
        "workers": turn.rung.workers,
        "threads": turn.threads,
        "loader_samples_per_s": alone,
        "loader_samples_per_s_range": alone_range,
        "fed_samples_per_s": fed_rate,
        "fed_samples_per_s_range": fed_range,
        "premade_samples_per_s": premade,
        "premade_samples_per_s_range": premade_range,
        "pipeline_efficiency": efficiency,
        "efficiency_range": efficiency_range,
        "data_wait_ms": fed.data_wait_ms,
        "compute_ms": fed.compute_ms,
        "premade_step_ms": fed.premade_step_ms,
        "rounds": len(probe.rates("alone")),
        "steps_per_turn": turn.steps,
        "peak_device_mib": _peak_device_mib(turn),
        "load": fed.load.as_dict() if fed.load else None,
        "load_note": fed.load.note() if busy and fed.load else "",
        "doctor": diagnose_pipeline(
            as_printed, num_workers=turn.rung.workers, cpu_cores=cores, threads=turn.threads
        ).splitlines()[0],
    }


def ladder_table(rows: list[dict[str, Any]], label: str = "") -> str:
    """A markdown table of a ladder's rows: medians over rounds with their ranges; rungs with another model marked;
    efficiencies above 1 read as 1.0 within the noise; a note for each rung measured while the machine was busy."""
    lines = [
        f"{label}\n" if label else "",
        "| rung | loader alone, samples/s | × first | fed end to end, samples/s | pre-made, samples/s | efficiency, "
        "fed / pre-made | data-wait ms | step ms, fed / pre-made |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        mark = " †" if r["model_note"] else ""
        lines.append(
            f"| {r['name']}{mark} | {_with_range(r, 'loader_samples_per_s')} | {r['loader_vs_first']:.1f} | "
            f"{_with_range(r, 'fed_samples_per_s')} | {_with_range(r, 'premade_samples_per_s')} | "
            f"{efficiency_cell(r)} | {r['data_wait_ms']:.1f} | {r['compute_ms']:.1f} / {r['premade_step_ms']:.1f} |"
        )
    notes = sorted({r["model_note"] for r in rows if r["model_note"]})
    lines += [f"\n† {note}" for note in notes]
    lines.append(
        f"\nmedians over {rows[0]['rounds']} interleaved rounds (range in brackets); efficiency is the fed "
        "median over the pre-made median, its range the lowest and highest ratio of one round's blocks"
    )
    lines += _threads_notes(rows)
    busy = busy_summary(rows)
    lines += [f"measured on a busy machine: {busy}"] if busy else []
    return "\n".join(lines)


def _threads_notes(rows: list[dict[str, Any]]) -> list[str]:
    """Why the pre-made rates of rungs that train the same model differ, where their intra-op threads do: a rung's
    workers take cores from its step (the CPU budget), so its pre-made baseline is that of fewer threads."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["model_note"], []).append(row)
    return [
        "pre-made rates of rungs that train the same model differ with their intra-op threads (the CPU budget gives "
        "a rung's step the cores its workers and other processes leave; each rung's efficiency is against its own "
        "baseline): " + ", ".join(f"'{r['name']}' {r['threads']} thread{'s' * (r['threads'] != 1)}" for r in same)
        for same in groups.values()
        if len({r.get("threads") for r in same}) > 1
    ]


def _with_range(row: dict[str, Any], key: str) -> str:
    low, high = row[f"{key}_range"]
    return f"{row[key]:.0f} ({low:.0f}–{high:.0f})"


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
    common: dict[str, Any] = {"seed": seed, "samples_per_epoch": samples_per_epoch, "pin_memory": pin}
    workers = cpu_budget(workers, usable_cpu_count())[0]  # the timed process keeps a core for its step

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
        return CachedCropLoader(
            cache,
            batch_size=batch_size,
            hr_crop=hr_crop,
            batches_per_epoch=Profile.endless,
            seed=seed,
            device=device,
            as_float=False,
        )

    def upscaled_input_model():
        return ESPCN(scale=1)  # the same network on pre-upscaled inputs: 16x the pixels at x4

    def lr_input_model():
        return ESPCN(scale=scale)

    hr_model = (
        f"ESPCN on pre-upscaled HR-size inputs: {scale * scale}x the pixels of the other rungs' model, so "
        "its fed rate and efficiency are not like for like"
    )
    return [
        Rung(
            "naive: pre-upscaled files from disk (seed's traditional way)",
            naive_disk,
            upscaled_input_model,
            model_note=hr_model,
            role="seed post",
        ),
        Rung(
            "naive: pre-upscaled float tensors in memory",
            naive_memory,
            upscaled_input_model,
            model_note=hr_model,
            role="in memory",
        ),
        Rung("lazy crop, num_workers=0", lazy_plain, lr_input_model, role="lazy crop"),
        Rung(
            f"lazy crop, {workers} worker{'s' * (workers != 1)}, prefetch 4, persistent",
            lazy_tuned,
            lr_input_model,
            workers,
            role="lazy crop, workers",
        ),
        Rung(
            "decoded uint8 cache, batch crops (uint8 out: the step makes it float)",
            cached,
            lr_input_model,
            role="decoded cache",
        ),
    ]


def seed_post_batch(
    model: Callable[[], nn.Module],
    *,
    device: torch.device,
    wanted: int,
    step_s: float | None = None,
    threads: int | None = None,
) -> tuple[int, str]:
    """The batch the post's 224-px pipeline can train at here: one step measured, scaled to the free memory (halved
    on a CUDA out-of-memory error) and, with `step_s`, to a step of at most about that many seconds (timed at a
    representative batch after a warm-up, checked at the batch chosen; the sentence gives the predicted step time),
    timed with `threads` intra-op threads when given (the rung's CPU budget, so the prediction is for its step)."""
    torch.manual_seed(0)
    step = classification_train_step(model().to(device))

    def run(batch: int) -> None:
        images = torch.randn(batch, 3, 224, 224, device=device)
        step((images, torch.randint(0, 10, (batch,), device=device)))

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

    def seed_post():
        dataset = ImageFolder(str(image_folder), transform=seed_post_transform())
        return make_loader(
            dataset,
            seed_batch,
            seed=seed,
            num_workers=seed_workers,
            pin_memory=pin,
            persistent_workers=True,
            samples_per_epoch=samples,
        )

    def native_pil():
        dataset = ImageFolder(str(image_folder), transform=native_size_transform())
        return make_loader(
            dataset,
            batch_size,
            seed=seed,
            num_workers=seed_workers,
            pin_memory=pin,
            persistent_workers=True,
            samples_per_epoch=samples,
        )

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


# --- one construction path per ladder: the notebooks and python -m helpers.course.bench ----------------------------


@dataclass
class LadderRun:
    """A ladder measured: its rows, the lines on its CPU budget and timing, its label, and what was decided first."""

    rows: list[dict[str, Any]]
    timing: str
    label: str
    notes: list[str]


def measure_sr_ladder(
    paths: list[Path],
    *,
    profile: Profile,
    device: torch.device,
    scale: int = 4,
    hr_crop: int | None = None,
    batch_size: int | None = None,
    peers: bool = False,
) -> LadderRun:
    """02's ladder and `python -m helpers.course.bench sr`: the SR rungs at the profile's crop and batch, run side by
    side; with `peers` (the bench) also the lazy-crop loader on lossless PNG copies of the same images, the file
    format's part of its speed."""
    hr_crop, batch_size = hr_crop or profile.sr_crop, batch_size or profile.sr_batch
    workers = max(1, min(8, usable_cpu_count()))
    rungs = sr_ladder(paths, device=device, batch_size=batch_size, scale=scale, hr_crop=hr_crop, workers=workers)
    if peers:
        pngs = png_copies(paths, data_root() / "png-copies" / f"{paths[0].parent.name}-{len(paths)}")
        png_rung = sr_ladder(pngs, device=device, batch_size=batch_size, scale=scale, hr_crop=hr_crop, workers=workers)[
            3
        ]
        png_rung.name = png_rung.name.replace("lazy crop", "lazy crop on PNG copies of the same images")
        png_rung.role = "lazy crop on PNG"
        rungs.insert(4, png_rung)
    rows, timing = run_ladder(rungs, device=device, rounds=profile.ladder_rounds, turn_s=profile.ladder_turn_s)
    label = f"x{scale}, {hr_crop}-px HR crops, batch {batch_size}, {len(paths)} images, ESPCN training step"
    return LadderRun(rows, timing, label, [])


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
    """04's ladder and `python -m helpers.course.bench cifar`: the post's 224-px rung at the batch that fits, the same
    family at 32 px, and the on-device rungs, with the profile's model, run side by side; with `peers` (the bench)
    also the shipped crop + flip configuration and FFCV doing the same work where FFCV is installed. `augment` builds
    the on-device rung's augmentation (default `cifar_train_augment`)."""
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


# --- the command line: python -m helpers.course.bench ------------------------------------------------------------


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
        payload = {
            "ladder": args.ladder,
            **provenance(profile=profile.name, device=device, rows=run.rows),
            "label": label,
            "environment": environment,
            "data": source.describe(),
            "timing": run.timing,
            "rungs": run.rows,
        }
        args.json.write_text(json.dumps(payload, indent=2))
        print(f"\nwrote {args.json}")
    return 0
