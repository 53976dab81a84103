"""JPEG decoding measured side by side: PIL, torchvision on the CPU, torchvision (nvJPEG) on CUDA, and NVIDIA DALI
when it is installed; rows that cannot run here say why instead of showing a number."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torchvision.io import decode_jpeg, read_file

from ..images import load_rgb_image
from ..loadmeter import LoadMeter
from ..precision import interleaved_times
from ..spread import Spread
from .verdicts.text import cores_used

# a decoder to time: its name, what one pass includes, and the pass
Decoder = tuple[str, str, Callable[[], Any]]


def jpeg_decode_benchmark(paths: list[Path], device: torch.device, repeats: int = 3) -> list[dict[str, Any]]:
    """Images/s decoding the same JPEG files: PIL, torchvision on the CPU, torchvision (nvJPEG) on CUDA when there
    is a GPU, and NVIDIA DALI when it is installed, each the median of `repeats` rounds with its range, the rounds
    interleaved (one pass of every decoder per round); rows that cannot run say why instead of a number."""
    encoded = [read_file(str(p)) for p in paths]
    gpu: Decoder | dict[str, Any] = {
        "decoder": "torchvision.io.decode_jpeg on CUDA",
        "images_per_s": None,
        "note": "skipped: no CUDA device here",
    }
    if device.type == "cuda":
        gpu = (
            f"torchvision.io.decode_jpeg, {device} (nvJPEG)",
            "decodes bytes already in memory, output on the GPU",
            lambda: decode_jpeg(encoded, device=device),
        )
    # the rows do not do the same work: what each includes is said beside its rate
    entries: list[Decoder | dict[str, Any]] = [
        (
            "PIL (Image.open + load), CPU",
            "reads each file, decodes, converts to RGB",
            lambda: [load_rgb_image(p) for p in paths],
        ),
        ("torchvision.io.decode_jpeg, CPU", "decodes bytes already in memory", lambda: decode_jpeg(encoded)),
        gpu,
        _dali_decoder(paths, device),
    ]
    timed = iter(_interleaved([e for e in entries if isinstance(e, tuple)], len(paths), repeats, device))
    return [next(timed) if isinstance(entry, tuple) else entry for entry in entries]


def _interleaved(
    decoders: list[Decoder],
    images: int,
    repeats: int,
    device: torch.device,
    new_meter: Callable[[], LoadMeter] = LoadMeter,
) -> list[dict[str, Any]]:
    """Each decoder warmed up once, then timed `repeats` rounds, one pass of every decoder per round, with `device`
    synchronised before each clock start and stop (precision.interleaved_times), so a GPU decoder's queued work is
    counted, all of it; each row carries the load the meter read over the rounds."""
    meter = new_meter()
    with meter:
        times = interleaved_times({name: run for name, _, run in decoders}, rounds=repeats, device=device)
    load = meter.total()
    rows = []
    for name, includes, _ in decoders:
        rate = Spread.of([images / (ms / 1000) for ms in times[name]])
        row = {"decoder": name, "includes": includes, "images_per_s": rate.median, "rounds": rate.n}
        row["images_per_s_range"] = rate.range
        if load is not None:
            row["load"] = load.as_dict()
            row["load_note"] = load.note() if load.busy else ""
        rows.append(row)
    return rows


def decode_table(rows: list[dict[str, Any]]) -> str:
    """The benchmark as a Markdown table: each decoder's median images/s with its range over rounds, what it
    includes, or why it did not run; a last line when other processes kept the machine busy."""
    lines = ["| decoder | images/s (range over rounds) | what it includes |", "|---|---:|---|"]
    for row in rows:
        if row["images_per_s"] is None:
            lines.append(f"| {row['decoder']} | | {row['note']} |")
            continue
        spread = Spread.around(row["images_per_s"], row["images_per_s_range"], row["rounds"])
        rate = spread.text() + (" (one round: no range)" if spread.n == 1 else "")
        lines.append(f"| {row['decoder']} | {rate} | {row['includes']} |")
    busy = [row for row in rows if row.get("load_note")]
    if busy:
        others = [row["load"]["other_cores"] for row in busy]
        used = cores_used(others)
        ran = sum(row["images_per_s"] is not None for row in rows)
        lines.append(
            f"\nMeasured on a busy machine: other processes used {used} of {busy[0]['load']['cores']} cores while "
            f"{len(busy)} of the {ran} decoders ran; these rates include that load."
        )
    return "\n".join(lines)


def _dali_decoder(paths: list[Path], device: torch.device) -> Decoder | dict[str, Any]:
    """NVIDIA DALI's file reader + mixed (nvJPEG) decoder as a decoder to time, when DALI and a GPU are there, else
    the row that says why not; never required."""
    try:
        from nvidia.dali import fn, pipeline_def
    except ImportError:
        return {
            "decoder": "NVIDIA DALI",
            "images_per_s": None,
            "note": "skipped: DALI is not installed (optional: pip install nvidia-dali-cuda120)",
        }
    if device.type != "cuda":
        return {"decoder": "NVIDIA DALI", "images_per_s": None, "note": "skipped: DALI decodes on a GPU"}

    # one batch at a time, made when run() asks: DALI's default pipelined executor decodes the next batches ahead
    # (prefetch_queue_depth=2), in the background, while the other decoders are being timed
    @pipeline_def(
        batch_size=len(paths),
        num_threads=4,
        device_id=device.index or 0,
        prefetch_queue_depth=1,
        exec_pipelined=False,
        exec_async=False,
    )
    def decode_pipeline():
        jpegs, _ = fn.readers.file(files=[str(p) for p in paths])
        return fn.decoders.image(jpegs, device="mixed")

    pipe = decode_pipeline()
    pipe.build()
    # run() returns when DALI's outputs are ready: the sync after it is for the torch side, and costs nothing
    return ("NVIDIA DALI (file reader + mixed decoder)", "reads each file, decodes on the GPU", pipe.run)
