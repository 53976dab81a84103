"""Evaluation as papers do it: super-resolution PSNR-Y/SSIM-Y against bicubic on whole images, and classifier top-1,
each rank evaluating its share under torchrun.

Example:
    >>> hr = torch.linspace(0, 1, 32).expand(3, 32, 32)  # a whole image, and below a crude half-size LR of it
    >>> pairs = [(hr[:, ::2, ::2], hr)]
    >>> scores = evaluate_sr(torch.nn.Upsample(scale_factor=2), pairs, scale=2, device="cpu")  # nearest neighbour
    >>> round(scores["psnr_y"], 1), round(scores["bicubic_psnr_y"], 1)
    (34.1, 37.2)

Copy with: metrics.py and resize.py (the protocol), step.py (autocast dtypes) and distributed.py (reductions; a
no-op on one process).
Needs: torch.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import nn

from .distributed import DistributedContext, all_reduce_sum, shard_range
from .metrics import bicubic_upscale, psnr_y, ssim_y
from .step import autocast_dtype


class ImagePairs(Protocol):
    """What evaluate_sr reads: a length and (LR, HR) pairs by index (a list of pairs, or SREvalDataset)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> tuple[torch.Tensor, torch.Tensor]: ...


@torch.no_grad()
def evaluate_sr(
    model: nn.Module,
    dataset: ImagePairs,
    *,
    scale: int,
    device: torch.device | str,
    context: DistributedContext | None = None,
) -> dict[str, Any]:
    """PSNR-Y and SSIM-Y (standard protocol) of the model and of bicubic on whole images; means and per-image values.

    Under torchrun each rank evaluates its share of the images and the means are reduced over ranks (the
    per-image lists are this rank's). The scores stay on the device until every image is done: one host read.
    """
    device = torch.device(device)
    context = context or DistributedContext(device=device)
    was_training = model.training
    model.eval()
    scored: list[torch.Tensor] = []
    for index in range(len(dataset))[shard_range(len(dataset), context)]:
        lr, hr = dataset[index]
        lr, hr = lr[None].to(device), hr[None].to(device)
        sr = model(lr).float().clamp(0, 1)
        bicubic = bicubic_upscale(lr, scale)
        scores = (psnr_y(sr, hr, scale), ssim_y(sr, hr, scale), psnr_y(bicubic, hr, scale), ssim_y(bicubic, hr, scale))
        scored.append(torch.cat([score.double().reshape(1) for score in scores]))  # kept on the device
    model.train(was_training)
    rows: list[list[float]] = torch.stack(scored).tolist() if scored else []  # one host read for every image
    *sums, count = all_reduce_sum([sum(r[i] for r in rows) for i in range(4)] + [len(rows)], context)
    means = [total / count for total in sums]
    return {
        "psnr_y": means[0],
        "ssim_y": means[1],
        "bicubic_psnr_y": means[2],
        "bicubic_ssim_y": means[3],
        "psnr_gain_db": means[0] - means[2],
        "per_image_psnr_y": [r[0] for r in rows],
        "per_image_bicubic_psnr_y": [r[2] for r in rows],
    }


@torch.no_grad()
def evaluate_classifier(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    preprocess: nn.Module,
    device: torch.device | str,
    batch_size: int = 500,
    precision: str = "fp32",
    context: DistributedContext | None = None,
) -> dict[str, float]:
    """Top-1 accuracy of `model` on uint8 images, preprocessed on the device (each rank counts its share on the device,
    read once at the end, then the counts are summed over ranks)."""
    device = torch.device(device)
    context = context or DistributedContext(device=device)
    preprocess = preprocess.to(device)  # built on the CPU as a rule: its buffers go where the batches are
    share = shard_range(len(images), context)
    images, labels = images[share], labels[share]
    was_training = model.training
    model.eval()
    labels = labels.to(device)  # one copy; the count stays on the device until the end (no host read per batch)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    dtype = autocast_dtype(precision)
    for start in range(0, len(images), batch_size):
        batch = preprocess(images[start : start + batch_size].to(device, non_blocking=True))
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            logits = model(batch)
        correct += (logits.argmax(1) == labels[start : start + batch_size]).sum()
    model.train(was_training)
    correct_total, count_total = all_reduce_sum([int(correct), len(images)], context)
    return {"top1": correct_total / max(count_total, 1)}
