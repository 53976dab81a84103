"""Choosing a batch size from measured memory: one training step measured at a small batch, scaled to the memory
free on the device (a CUDA GPU's free bytes, or a CPU machine's available RAM), halved on a CUDA out-of-memory error
(the allocator's, cuBLAS's or cuDNN's); and the batch whose step takes a given time, from timed steps at two batches.

Example:
    >>> model = torch.nn.Linear(64, 10)
    >>> def run_step(batch): model(torch.randn(batch, 64)).sum().backward()
    >>> batch_that_fits(run_step, wanted=256, device=torch.device("cpu"))[0]
    256
    >>> batch, seconds, why = batch_for_step_time(lambda batch: 0.01 + 0.001 * batch, largest=1024, step_s=0.1)
    >>> batch, round(seconds, 3)
    (90, 0.1)

Copy with: memory.py (resident and free memory probes).
Needs: torch.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import torch

from .memory import current_rss_bytes, free_memory_bytes, peak_rss_bytes, reset_peak_rss

# what cuBLAS and cuDNN say when they cannot allocate (torch raises these as RuntimeError, not OutOfMemoryError)
_ALLOCATION_FAILURES = ("CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED", "CUDA out of memory")


def _step_bytes(run_step: Callable[[int], Any], batch: int, device: torch.device) -> int:
    """Peak extra memory of one step at `batch` samples (device allocator on CUDA; on a CPU, resident memory or the
    tensors saved for backward, whichever is larger)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        run_step(batch)
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    # On a CPU, resident memory misses what the allocator reuses from earlier steps (it grows by little or nothing),
    # so the bytes autograd saves for the backward pass, the bulk of a step's memory, are counted too.
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        try:
            saved[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        except (RuntimeError, NotImplementedError):  # tensors without a plain storage (mkldnn, sparse)
            saved[id(tensor)] = tensor.numel() * tensor.element_size()
        return tensor

    reset_peak_rss()
    before = current_rss_bytes() or 0
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        run_step(batch)
    return max((peak_rss_bytes() or 0) - before, sum(saved.values()), 1)


def batch_that_fits(
    run_step: Callable[[int], Any], *, wanted: int, device: torch.device, share: float = 0.5, probe: int = 2
) -> tuple[int, str]:
    """The largest batch up to `wanted` whose training step fits in `share` of the free memory: one step at `probe`
    samples is measured and scaled; on CUDA an out-of-memory error then halves the batch until a step succeeds.

    `run_step(batch)` runs one step at that batch size. Returns the batch and a sentence saying how it was chosen.
    """
    device = torch.device(device)
    per_sample = _step_bytes(run_step, probe, device) / probe
    free = free_memory_bytes(device)
    fits = wanted if free is None else max(1, min(wanted, int(share * free / per_sample)))
    why = (
        f"batch {fits}: {per_sample / 2**20:.0f} MiB per sample measured, {free / 2**30:.1f} GiB free"
        if free is not None
        else f"batch {fits}: free memory unknown here"
    )
    while True:
        try:
            run_step(fits)
            return fits, why + (f" (asked for {wanted})" if fits < wanted else "")
        except RuntimeError as error:  # torch.cuda.OutOfMemoryError is one
            if fits == 1 or not is_out_of_memory(error):
                raise
            traceback.clear_frames(error.__traceback__)  # the failed step's frames hold its activations
        # here the error and its traceback are gone, so what the failed step allocated can go back to the driver
        torch.cuda.empty_cache()
        fits //= 2
        why += f"; out of memory on the device, halved to {fits}"


def is_out_of_memory(error: BaseException) -> bool:
    """Whether `error` is the device running out of memory: the caching allocator's OutOfMemoryError, or cuBLAS or
    cuDNN failing to allocate their workspace, which reach Python as a RuntimeError that names the failure."""
    if isinstance(error, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and any(sign in str(error) for sign in _ALLOCATION_FAILURES)


def batch_for_step_time(
    seconds_at: Callable[[int], float], *, largest: int, step_s: float, probe: int = 16
) -> tuple[int, float, str]:
    """The largest batch up to `largest` whose training step takes at most about `step_s` seconds, from
    `seconds_at(batch)` (the seconds of one step at that batch, device work included).

    One untimed warm-up step and one timed step at `probe` samples (large enough that a step's fixed costs do not
    decide the per-image cost), a batch scaled from that, one timed step at that batch, and the final batch from the
    line through the two timings (a step's cost is about affine in its batch). Returns the batch, its predicted step
    seconds and a sentence saying how it was chosen."""
    probe = max(1, min(probe, largest))
    seconds_at(probe)  # warm-up: kernel selection and allocation are not the step's cost
    at_probe = seconds_at(probe)
    first = max(1, min(largest, int(step_s * probe / max(at_probe, 1e-12))))
    at_first = seconds_at(first)
    per_image = (at_first - at_probe) / (first - probe) if abs(first - probe) >= max(1, probe // 2) else 0.0
    fixed = at_first - per_image * first
    if per_image <= 0 or fixed < 0:  # too close to fit a line, or noise bent it: proportional to the check
        per_image, fixed = at_first / first, 0.0
    batch = max(1, min(largest, int((step_s - fixed) / per_image)))
    predicted = fixed + per_image * batch
    why = (
        f"{at_probe:.3g} s per step at batch {probe} and {at_first:.3g} s at batch {first}: batch {batch}, "
        f"predicted step {predicted:.2g} s (for steps of at most about {step_s:.2g} s)"
    )
    return batch, predicted, why
