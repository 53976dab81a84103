"""Augmentation on batches already on the device, with per-sample randomness."""

from __future__ import annotations

import torch


def paired_dihedral(
    lr: torch.Tensor, hr: torch.Tensor, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Give each (LR, HR) pair of square (B, C, h, w) / (B, C, H, W) batches its own random flip/rot90, the same on both.

    Works on whatever device the batches are on: samples are grouped by the drawn transform (8 groups at most), so
    the cost is a few batched copies, not a Python loop over samples.
    """
    if lr.shape[0] != hr.shape[0]:
        raise ValueError(f"LR and HR batches differ in size: {lr.shape[0]} vs {hr.shape[0]}")
    if lr.shape[-1] != lr.shape[-2] or hr.shape[-1] != hr.shape[-2]:
        raise ValueError(f"rot90 needs square crops, got LR {tuple(lr.shape[-2:])} and HR {tuple(hr.shape[-2:])}")
    choices = torch.randint(0, 8, (lr.shape[0],), generator=generator)
    out_lr, out_hr = torch.empty_like(lr), torch.empty_like(hr)
    for choice in choices.unique().tolist():
        index = (choices == choice).nonzero().flatten().to(lr.device)
        for source, target in ((lr, out_lr), (hr, out_hr)):
            picked = source.index_select(0, index)
            if choice & 1:
                picked = picked.flip(-1)
            if choice & 2:
                picked = picked.flip(-2)
            if choice & 4:
                picked = picked.transpose(-1, -2)
            target.index_copy_(0, index, picked)
    return out_lr, out_hr
