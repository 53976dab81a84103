"""JPEG decoding measured side by side: PIL, torchvision on the CPU, torchvision (nvJPEG) on CUDA, and NVIDIA DALI
when it is installed; rows that cannot run here say why instead of showing a number."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torchvision.io import decode_jpeg, read_file

from ..images import load_rgb_image
from ..measure import synchronize


def jpeg_decode_benchmark(paths: list[Path], device: torch.device, repeats: int = 3) -> list[dict[str, Any]]:
    """Images/s decoding the same JPEG files: PIL, torchvision on the CPU, torchvision (nvJPEG) on CUDA when there
    is a GPU, and NVIDIA DALI when it is installed; rows that cannot run say why instead of a number."""
    encoded = [read_file(str(p)) for p in paths]
    rows: list[dict[str, Any]] = []

    def timed(name: str, includes: str, decode: Callable[[], Any], sync: torch.device | None = None) -> None:
        decode()  # warm-up: library initialisation, nvJPEG handles
        start = time.perf_counter()
        for _ in range(repeats):
            decode()
        if sync is not None:
            synchronize(sync)
        rows.append(
            {
                "decoder": name,
                "includes": includes,
                "images_per_s": repeats * len(paths) / (time.perf_counter() - start),
            }
        )

    # the rows do not do the same work: what each includes is said beside its rate
    timed(
        "PIL (Image.open + load), CPU",
        "reads each file, decodes, converts to RGB",
        lambda: [load_rgb_image(p) for p in paths],
    )
    timed("torchvision.io.decode_jpeg, CPU", "decodes bytes already in memory", lambda: decode_jpeg(encoded))
    if device.type == "cuda":
        timed(
            f"torchvision.io.decode_jpeg, {device} (nvJPEG)",
            "decodes bytes already in memory, output on the GPU",
            lambda: decode_jpeg(encoded, device=device),
            device,
        )
    else:
        rows.append(
            {
                "decoder": "torchvision.io.decode_jpeg on CUDA",
                "images_per_s": None,
                "note": "skipped: no CUDA device here",
            }
        )
    rows.append(_dali_row(paths, repeats, device))
    return rows


def _dali_row(paths: list[Path], repeats: int, device: torch.device) -> dict[str, Any]:
    """NVIDIA DALI's file reader + mixed (nvJPEG) decoder, when DALI and a GPU are there; never required."""
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
    batch = len(paths)

    @pipeline_def(batch_size=batch, num_threads=4, device_id=device.index or 0)
    def decode_pipeline():
        jpegs, _ = fn.readers.file(files=[str(p) for p in paths])
        return fn.decoders.image(jpegs, device="mixed")

    pipe = decode_pipeline()
    pipe.build()
    pipe.run()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        pipe.run()
    return {
        "decoder": "NVIDIA DALI (file reader + mixed decoder)",
        "includes": "reads each file, decodes on the GPU",
        "images_per_s": repeats * batch / (time.perf_counter() - start),
    }
