"""One correct mixed-precision training step: torch.amp autocast (fp32, bf16, or fp16 with a GradScaler), gradient
accumulation with a short last group handled, skipped overflow steps counted, non-finite losses raised; plus a GAN
super-resolution step that feeds generator and discriminator from one batch.

Copy alone.
Needs: torch.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

PRECISIONS = ("fp32", "bf16", "fp16")


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or infinite: training stops with the step that did it, never with silent NaNs."""


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype for a precision name (None for fp32, which runs without autocast)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


class TrainStep:
    """A training step done right: torch.amp autocast (fp32, bf16, or fp16 with a GradScaler), gradient accumulation
    over `accumulation_steps` micro-batches (loss divided by their number, optimizer and scaler stepped once per
    group, a short last group rescaled by `flush`), `zero_grad(set_to_none=True)`, optional channels_last,
    non-blocking transfers, skipped (overflow) steps counted, and non-finite losses raised.

    Call it with each micro-batch; call `flush()` at the end of an epoch so a remainder group is not lost.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        *,
        device: torch.device | str,
        precision: str = "fp32",
        accumulation_steps: int = 1,
        channels_last: bool = False,
        scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
        max_grad_norm: float | None = None,
        batch_transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> None:
        if accumulation_steps < 1:
            raise ValueError(f"accumulation_steps must be at least 1, not {accumulation_steps}")
        self.device = torch.device(device)
        self.dtype = autocast_dtype(precision)
        if precision == "bf16" and self.device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise ValueError(f"bf16 was requested but {torch.cuda.get_device_name(self.device)} does not support it")
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.precision, self.accumulation_steps = precision, accumulation_steps
        self.channels_last, self.scheduler, self.max_grad_norm = channels_last, scheduler, max_grad_norm
        self.batch_transform = batch_transform
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=precision == "fp16")
        if channels_last:
            model.to(memory_format=torch.channels_last)
        self.pending = 0  # micro-batches accumulated since the last optimizer step
        self.micro_batches = 0
        self.optimizer_steps = 0
        self.skipped_steps = 0
        optimizer.zero_grad(set_to_none=True)

    def _to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.to(self.device, non_blocking=True)
        if self.channels_last and tensor.ndim == 4:
            tensor = tensor.contiguous(memory_format=torch.channels_last)
        return tensor

    def forward_loss(self, inputs: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the model under this step's autocast; return (outputs, loss) without a backward pass."""
        inputs, targets = self._to_device(inputs), targets.to(self.device, non_blocking=True)
        if self.batch_transform is not None:
            inputs = self.batch_transform(inputs)
        with torch.autocast(self.device.type, dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
            outputs = self.model(inputs)
            loss = self.loss_fn(outputs, targets)
        return outputs, loss

    def __call__(self, inputs: torch.Tensor, targets: torch.Tensor) -> float:
        """Forward and backward one micro-batch; step the optimizer when a group is complete; return the loss."""
        self.model.train()
        _, loss = self.forward_loss(inputs, targets)
        value = float(loss.detach())
        if not torch.isfinite(torch.tensor(value)):
            raise NonFiniteLossError(
                f"loss is {value} at micro-batch {self.micro_batches} (optimizer step {self.optimizer_steps}, "
                f"precision {self.precision}); lower the learning rate, check the inputs for NaNs, or use fp32/bf16"
            )
        last_of_group = self.pending + 1 == self.accumulation_steps
        if hasattr(self.model, "no_sync") and not last_of_group:
            with self.model.no_sync():  # DDP: all-reduce gradients once per group, not per micro-batch
                self.scaler.scale(loss / self.accumulation_steps).backward()
        else:
            self.scaler.scale(loss / self.accumulation_steps).backward()
        self.pending += 1
        self.micro_batches += 1
        if self.pending == self.accumulation_steps:
            self._optimizer_step()
        return value

    def flush(self) -> None:
        """Step on a short last group (epoch end): gradients are rescaled to the mean over its micro-batches."""
        if self.pending == 0:
            return
        if self.pending != self.accumulation_steps:
            factor = self.accumulation_steps / self.pending
            for parameter in self.model.parameters():
                if parameter.grad is not None:
                    parameter.grad.mul_(factor)
        self._optimizer_step()

    def _optimizer_step(self) -> None:
        if self.max_grad_norm is not None:
            self.scaler.unscale_(self.optimizer)
            nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        scale_before = self.scaler.get_scale() if self.scaler.is_enabled() else None
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if scale_before is not None and self.scaler.get_scale() < scale_before:
            self.skipped_steps += 1  # inf/NaN gradients: GradScaler skipped optimizer.step and lowered the scale
        else:
            self.optimizer_steps += 1
            if self.scheduler is not None:
                self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.pending = 0

    def state_dict(self) -> dict[str, Any]:
        """Counters and the GradScaler's state, for checkpoints."""
        return {
            "scaler": self.scaler.state_dict(),
            "micro_batches": self.micro_batches,
            "optimizer_steps": self.optimizer_steps,
            "skipped_steps": self.skipped_steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` saved."""
        self.scaler.load_state_dict(state["scaler"])
        self.micro_batches = state["micro_batches"]
        self.optimizer_steps = state["optimizer_steps"]
        self.skipped_steps = state["skipped_steps"]


def gan_sr_step(
    generator: nn.Module,
    discriminator: nn.Module,
    *,
    device: torch.device | str,
    adversarial_weight: float = 1e-3,
    learning_rate: float = 1e-4,
) -> Callable[..., dict[str, float]]:
    """One GAN super-resolution iteration on one float (LR, HR) batch: a discriminator step on real HR against the
    generator's output, then a generator step (L1 + a small adversarial term). Both models use the same batch, so a
    single loader feeds them; pass `real_hr` to give the discriminator other real images (a second loader's)."""
    g_optimizer = torch.optim.Adam(generator.parameters(), lr=learning_rate, betas=(0.9, 0.99))
    d_optimizer = torch.optim.Adam(discriminator.parameters(), lr=learning_rate, betas=(0.9, 0.99))
    bce = nn.BCEWithLogitsLoss()
    device = torch.device(device)

    def step(batch: tuple[torch.Tensor, torch.Tensor], real_hr: torch.Tensor | None = None) -> dict[str, float]:
        lr_images, hr = (t.to(device, non_blocking=True) for t in batch)
        real = hr if real_hr is None else real_hr.to(device, non_blocking=True)
        fake = generator(lr_images)
        d_optimizer.zero_grad(set_to_none=True)
        real_logits, fake_logits = discriminator(real), discriminator(fake.detach())
        d_loss = bce(real_logits, torch.ones_like(real_logits)) + bce(fake_logits, torch.zeros_like(fake_logits))
        d_loss.backward()
        d_optimizer.step()
        g_optimizer.zero_grad(set_to_none=True)
        judged = discriminator(fake)
        g_loss = nn.functional.l1_loss(fake, hr) + adversarial_weight * bce(judged, torch.ones_like(judged))
        g_loss.backward()
        g_optimizer.step()
        return {"d_loss": float(d_loss.detach()), "g_loss": float(g_loss.detach())}

    return step


# --- choosing a precision ----------------------------------------------------------------------------------------


def cpu_has_native_bf16() -> bool:
    """True when oneDNN reports native bf16 on this CPU (AVX512-BF16 or AMX); elsewhere bf16 autocast is emulated."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN
        return False


def native_precisions(device: torch.device | str) -> list[str]:
    """Precisions `device` runs natively: fp32 always; on CUDA fp16 (with a GradScaler) and bf16 from compute
    capability 8.0 (Ampere) on; on a CPU bf16 only where oneDNN has native bf16 instructions."""
    device = torch.device(device)
    if device.type == "cuda":
        major, _ = torch.cuda.get_device_capability(device)
        return ["fp32", "fp16", *(["bf16"] if major >= 8 else [])]
    if device.type == "cpu" and cpu_has_native_bf16():
        return ["fp32", "bf16"]
    return ["fp32"]


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a run should use on this device, the median step time of each candidate, and why."""

    precision: str
    step_ms: dict[str, float]
    reason: str


def fastest_precision(
    model: nn.Module,
    example: tuple[torch.Tensor, torch.Tensor],
    *,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    device: torch.device | str,
    steps: int = 3,
    channels_last: bool = False,
) -> PrecisionChoice:
    """Time `steps` training steps (after one warm-up) of a copy of `model` on `example` in each native precision of
    `device`; return the fastest. With only fp32 native, nothing is timed."""
    device = torch.device(device)
    candidates = native_precisions(device)
    if candidates == ["fp32"]:
        return PrecisionChoice("fp32", {}, f"fp32: the only precision {device.type} runs natively here")
    timings: dict[str, float] = {}
    for precision in candidates:
        trial = copy.deepcopy(model).to(device)
        step = TrainStep(trial, torch.optim.SGD(trial.parameters(), lr=1e-6), loss_fn, device=device,
                         precision=precision, channels_last=channels_last)  # fmt: skip
        times = []
        for index in range(steps + 1):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            step(*example)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if index:  # the first step is warm-up: kernel selection, allocator
                times.append(1000 * (time.perf_counter() - start))
        timings[precision] = statistics.median(times)
        del trial, step
    best = min(timings, key=timings.get)
    shown = ", ".join(f"{p} {ms:.1f} ms" for p, ms in timings.items())
    return PrecisionChoice(best, timings, f"{best}: the fastest measured training step on {device} ({shown})")
