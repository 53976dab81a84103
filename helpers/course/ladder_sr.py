"""The super-resolution ladder (02 and `python -m helpers.course.bench sr`): the seed post's pre-upscaled files and tensors,
lazy crops with and without workers, and the decoded uint8 cache, all training ESPCN."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..env import usable_cpu_count
from ..loading import make_loader
from ..loadmeter import cpu_budget
from ..models import ESPCN
from ..sr_cache import CachedCropLoader, DecodedSRCache
from ..sr_data import LazyCropSRDataset
from .baselines import (
    InMemoryNaiveSRDataset,
    NaiveSRDataset,
)
from .data import data_root
from .ladder import LadderRun, Rung, run_ladder
from .profiles import Profile
from .sr_formats import png_copies


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
    """02's ladder and `python -m helpers.course.bench sr`: the SR rungs at the profile's crop and batch, run side by side;
    with `peers` (the bench) also the lazy-crop loader on lossless PNG copies of the same images, the file format's
    part of its speed."""
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
