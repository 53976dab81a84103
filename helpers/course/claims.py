"""The BSD100 post's pitfall list, measured (lesson 05): OpenCV's resize against PIL's and MATLAB's for making LR
images, device memory with and without autocast, and what `del` and `torch.cuda.empty_cache()` do to the caching
allocator (the last two need CUDA: PyTorch's CPU allocator has no cache to inspect)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn

from ..metrics import bicubic_upscale, psnr_y
from ..resize import downscale

MIB = 2**20


def _pil_lr(hr_uint8: np.ndarray, scale: int) -> np.ndarray:
    """LR by Pillow's bicubic (a = -0.5; its support widens with the factor when shrinking, so it antialiases)."""
    height, width = hr_uint8.shape[:2]
    return np.asarray(Image.fromarray(hr_uint8).resize((width // scale, height // scale), Image.Resampling.BICUBIC))


def _lr_makers() -> dict[str, Callable[[np.ndarray, int], np.ndarray] | str]:
    """The ways to make an LR image from a uint8 HxWx3 HR one; a string says why a way is not available here."""

    def matlab(hr: np.ndarray, scale: int) -> np.ndarray:
        tensor = torch.from_numpy(hr).permute(2, 0, 1).contiguous()
        return downscale(tensor, scale).permute(1, 2, 0).numpy()

    makers: dict[str, Callable[[np.ndarray, int], np.ndarray] | str] = {
        "MATLAB imresize (the protocol)": matlab,
        "Pillow BICUBIC": _pil_lr,
    }
    try:
        import cv2  # OpenCV is optional: the claim is about it, the course does not need it
    except ImportError:
        makers["OpenCV"] = "OpenCV is not installed (pip install opencv-python-headless)"
        return makers
    for name, flag in [("OpenCV INTER_CUBIC", cv2.INTER_CUBIC), ("OpenCV INTER_AREA", cv2.INTER_AREA)]:

        def opencv_lr(hr: np.ndarray, scale: int, flag: int = flag) -> np.ndarray:
            return cv2.resize(hr, (hr.shape[1] // scale, hr.shape[0] // scale), interpolation=flag)

        makers[name] = opencv_lr
    return makers


def resize_rows(hr_images: Sequence[torch.Tensor], scale: int) -> list[dict[str, Any]]:
    """For each way of making LR from the same HR images (float (3, H, W) in [0, 1], H and W multiples of `scale`):
    mean PSNR-Y of its LR against MATLAB's LR, and the bicubic baseline's mean PSNR-Y against HR from that LR."""
    makers = _lr_makers()
    matlab = makers["MATLAB imresize (the protocol)"]
    assert callable(matlab)
    rows: list[dict[str, Any]] = []
    for name, make in makers.items():
        if isinstance(make, str):
            rows.append({"way": name, "lr_psnr_vs_matlab": None, "baseline_psnr": None, "note": make})
            continue
        against, baseline = [], []
        for hr in hr_images:
            hr_uint8 = hr.mul(255).round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()
            reference = torch.from_numpy(np.array(matlab(hr_uint8, scale)))
            lr = torch.from_numpy(np.array(make(hr_uint8, scale)))  # a writable copy (Pillow gives read-only arrays)
            as_float = [t.permute(2, 0, 1)[None].float().clamp(0, 255) / 255 for t in (lr, reference)]
            against.append(float(psnr_y(as_float[0], as_float[1], 0)))
            baseline.append(float(psnr_y(bicubic_upscale(as_float[0], scale).clamp(0, 1), hr[None], scale)))
        rows.append(
            {
                "way": name,
                "lr_psnr_vs_matlab": float(np.mean(against)),
                "baseline_psnr": float(np.mean(baseline)),
                "note": "",
            }
        )
    return rows


def amp_memory_rows(
    make_model: Callable[[], nn.Module],
    batch: tuple[torch.Tensor, torch.Tensor],
    device: torch.device,
    precisions: Sequence[str],
) -> list[dict[str, Any]]:
    """CUDA only: peak allocated device memory of two L1 + Adam training steps per precision ("fp32", "bf16",
    "fp16"), each on a fresh model with the allocator's peak reset first."""
    dtypes = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
    inputs, targets = (t.to(device) for t in batch)
    rows = []
    for precision in precisions:
        model = make_model().to(device)
        optimizer = torch.optim.Adam(model.parameters())
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        for _ in range(2):  # the second step has Adam's state, as every later one does
            with torch.autocast("cuda", dtype=dtypes[precision], enabled=dtypes[precision] is not None):
                loss = nn.functional.l1_loss(model(inputs), targets)
            loss.backward()  # fp16 without a GradScaler: fine for memory, not for training
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize(device)
        rows.append({"precision": precision, "peak_mib": torch.cuda.max_memory_allocated(device) / MIB})
        del model, optimizer, loss
    return rows


def allocator_rows(device: torch.device, *, steps: int = 8) -> list[dict[str, Any]]:
    """CUDA only: the caching allocator's allocated and reserved MiB after `del` and `empty_cache()` of a 256 MiB
    tensor, and after `steps` steps that keep each loss with its graph, the loss alone, or call empty_cache()."""

    def reading(what: str) -> dict[str, Any]:
        torch.cuda.synchronize(device)
        return {
            "what": what,
            "allocated_mib": torch.cuda.memory_allocated(device) / MIB,
            "reserved_mib": torch.cuda.memory_reserved(device) / MIB,
        }

    rows = [reading("start")]
    block = torch.empty(256 * MIB, dtype=torch.uint8, device=device)
    rows.append(reading("a 256 MiB tensor allocated"))
    del block
    rows.append(reading("after del"))
    torch.cuda.empty_cache()
    rows.append(reading("after del, then empty_cache()"))
    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 3, 3, padding=1)).to(device)
    inputs = torch.rand(16, 3, 128, 128, device=device)
    for keep, label in [
        ("graph", "losses kept with their graphs (losses.append(loss))"),
        ("value", "losses kept detached (losses.append(loss.detach()))"),
        ("graph+empty", "graphs kept, empty_cache() every step"),
    ]:
        losses = []
        for _ in range(steps):
            loss = model(inputs).square().mean()
            losses.append(loss if keep.startswith("graph") else loss.detach())
            if keep == "graph+empty":
                torch.cuda.empty_cache()
        rows.append(reading(f"{steps} forward passes, {label}"))
        del losses, loss
    return rows
