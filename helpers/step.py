"""One correct mixed-precision training step: torch.amp autocast (fp32, bf16, or fp16 with a GradScaler), gradient
accumulation that is correct under DDP (non-final micro-batches inside `no_sync`, a short last group reduced and
scaled by its real size), skipped overflow steps counted (the scheduler waits for them), and non-finite losses raised
from device-side flags, without a host synchronisation per micro-batch; plus a GAN super-resolution step that feeds
generator and discriminator from one batch.

Example:
    >>> model = torch.nn.Linear(4, 1)
    >>> step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.MSELoss(), device="cpu")
    >>> result = step(torch.ones(8, 4), torch.zeros(8, 1))  # autocast, backward, optimizer step; no host sync
    >>> result.loss.shape, native_precisions("cpu")[0]
    (torch.Size([]), 'fp32')

Copy alone (precision.py, with this file, chooses the precision by measurement).
Needs: torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

PRECISIONS = ("fp32", "bf16", "fp16")
SCHEDULER_INTERVALS = ("step", "epoch")


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype for a precision name (None for fp32, which runs without autocast)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


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


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or infinite: training stops with the step that did it, never with silent NaNs."""


@dataclass(frozen=True)
class StepResult:
    """What one micro-batch gave: its loss and the model's outputs, both detached and still on the device (reading
    them on the host, with `float(result)` or `.item()`, waits for the device: do it only when you log)."""

    loss: torch.Tensor
    outputs: Any

    def __float__(self) -> float:
        """The loss as a Python float (a host synchronisation)."""
        return float(self.loss)


class TrainStep:
    """A training step done right: torch.amp autocast (fp32, bf16, or fp16 with a GradScaler), gradient accumulation
    over `accumulation_steps` micro-batches (loss divided by their number, optimizer and scaler stepped once per
    group; under DDP the non-final micro-batches run forward and backward inside `no_sync`, so gradients are
    all-reduced once per group), `zero_grad(set_to_none=True)`, optional channels_last, non-blocking transfers.

    Each call returns a `StepResult` whose loss stays on the device: nothing here waits for the device per
    micro-batch. Non-finite losses are flagged on the device and checked every `check_finite_every` optimizer steps
    (on CUDA without blocking: the flag is copied to pinned memory and read once its event has completed), raising
    `NonFiniteLossError`. Steps the GradScaler skips (inf gradients) are counted in `skipped_steps` and do not step
    the scheduler: to know it, fp16 reads the scale once per optimizer step (a host synchronisation; GradScaler's
    own step reads its inf check too, unless the optimizer is fused). `scheduler_interval` says when `scheduler` steps: "step" (after every optimizer step that was
    taken) or "epoch" (in `end_epoch`).

    Call it with each micro-batch, with `last=True` on the last micro-batch of an epoch when you know it (a short
    group then synchronises on it), and call `end_epoch()` (or `flush()`) at the end of each epoch so a remainder
    group is not lost.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        loss_fn: Callable[[Any, torch.Tensor], torch.Tensor],
        *,
        device: torch.device | str,
        precision: str = "fp32",
        accumulation_steps: int = 1,
        channels_last: bool = False,
        scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
        scheduler_interval: str = "step",
        max_grad_norm: float | None = None,
        batch_transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
        check_finite_every: int = 1,
    ) -> None:
        if accumulation_steps < 1 or check_finite_every < 1:
            raise ValueError(
                f"accumulation_steps ({accumulation_steps}) and check_finite_every "
                f"({check_finite_every}) must be at least 1"
            )
        if scheduler_interval not in SCHEDULER_INTERVALS:
            raise ValueError(f"scheduler_interval must be one of {SCHEDULER_INTERVALS}, not {scheduler_interval!r}")
        self.device = torch.device(device)
        self.dtype = autocast_dtype(precision)
        if precision == "bf16" and self.device.type == "cuda" and "bf16" not in native_precisions(self.device):
            raise ValueError(
                f"bf16 was requested but {torch.cuda.get_device_name(self.device)} runs it only emulated (slower than "
                "fp16): use precision='fp16' there"
            )
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.precision, self.accumulation_steps = precision, accumulation_steps
        self.channels_last, self.scheduler, self.max_grad_norm = channels_last, scheduler, max_grad_norm
        self.scheduler_interval, self.check_finite_every = scheduler_interval, check_finite_every
        if isinstance(batch_transform, nn.Module):  # built on the CPU (normalisation buffers): it goes to the batches
            batch_transform = batch_transform.to(self.device)
        self.batch_transform = batch_transform
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=precision == "fp16")
        self._scale = self.scaler.get_scale()  # before the first step: the initial scale, read without a sync
        if channels_last:
            model.to(memory_format=torch.channels_last)
        self.pending = 0  # micro-batches accumulated since the last optimizer step
        self.micro_batches = 0
        self.optimizer_steps = 0  # optimizer steps taken
        self.skipped_steps = 0  # optimizer steps the GradScaler skipped (inf/NaN gradients)
        self._nonfinite: torch.Tensor | None = None  # on the device: a loss since the last check was NaN or inf
        self._unchecked_from = 0  # the first micro-batch the next check covers
        self._checks: list[tuple[torch.Tensor, Any, int, int]] = []  # (host flag, event, first, last micro-batch)
        optimizer.zero_grad(set_to_none=True)

    def _to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.to(self.device, non_blocking=True)
        if self.channels_last and tensor.ndim == 4:
            tensor = tensor.contiguous(memory_format=torch.channels_last)
        return tensor

    def forward_loss(self, inputs: torch.Tensor, targets: torch.Tensor) -> tuple[Any, torch.Tensor]:
        """Run the model under this step's autocast; return (outputs, loss) without a backward pass."""
        inputs, targets = self._to_device(inputs), targets.to(self.device, non_blocking=True)
        if self.batch_transform is not None:
            inputs = self.batch_transform(inputs)
        with torch.autocast(self.device.type, dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
            outputs = self.model(inputs)
            loss = self.loss_fn(outputs, targets)
        return outputs, loss

    def _ddp(self) -> bool:
        return hasattr(self.model, "no_sync") and dist.is_available() and dist.is_initialized()

    def __call__(self, inputs: torch.Tensor, targets: torch.Tensor, *, last: bool = False) -> StepResult:
        """Forward and backward one micro-batch; step the optimizer when its group is complete (or when `last`
        says it is the epoch's last micro-batch); return its loss and outputs, still on the device."""
        self.model.train()
        closes_group = last or self.pending + 1 == self.accumulation_steps
        # DDP decides in the forward whether the next backward all-reduces: both must be inside no_sync
        quiet = (
            # torch types nn.Module.__getattr__ as Tensor | Module; no_sync is DDP's (or FSDP's) method
            self.model.no_sync()  # type: ignore[operator]
            if hasattr(self.model, "no_sync") and not closes_group
            else contextlib.nullcontext()
        )
        with quiet:
            outputs, loss = self.forward_loss(inputs, targets)
            self.scaler.scale(loss / self.accumulation_steps).backward()
        loss = loss.detach()
        bad = ~torch.isfinite(loss)  # on the device: no host synchronisation
        self._nonfinite = bad if self._nonfinite is None else self._nonfinite.logical_or_(bad)
        self.pending += 1
        self.micro_batches += 1
        if closes_group:
            self._rescale_short_group()
            self._optimizer_step()
        return StepResult(loss, outputs.detach() if isinstance(outputs, torch.Tensor) else outputs)

    def flush(self) -> None:
        """Step on a short last group (epoch end): gradients are rescaled to the mean over its micro-batches; under
        DDP they were not reduced yet (every one ran in `no_sync`), so they are all-reduced here first."""
        if self.pending == 0:
            return
        if self._ddp():
            group = getattr(self.model, "process_group", None)
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            flat = torch.cat([g.reshape(-1) for g in grads])  # one all-reduce for the whole group
            dist.all_reduce(flat, group=group)
            flat /= dist.get_world_size(group)
            for grad, part in zip(grads, flat.split([g.numel() for g in grads])):
                grad.copy_(part.view_as(grad))
        self._rescale_short_group()
        self._optimizer_step()

    def end_epoch(self) -> None:
        """End of an epoch: flush a short group, check every flagged loss (waiting for the device), and step a
        per-epoch scheduler."""
        self.flush()
        self.check_finite(wait=True)
        if self.scheduler is not None and self.scheduler_interval == "epoch":
            self.scheduler.step()

    def _rescale_short_group(self) -> None:
        if self.pending == self.accumulation_steps:
            return
        factor = self.accumulation_steps / self.pending  # each micro-batch's loss was divided by the full size
        for parameter in self.model.parameters():
            if parameter.grad is not None:
                parameter.grad.mul_(factor)

    def _optimizer_step(self) -> None:
        if self.max_grad_norm is not None:
            self.scaler.unscale_(self.optimizer)
            nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self._skipped_by_scaler():
            self.skipped_steps += 1  # inf/NaN gradients: GradScaler skipped optimizer.step and lowered the scale
        else:
            self.optimizer_steps += 1
            if self.scheduler is not None and self.scheduler_interval == "step":
                self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.pending = 0
        if (self.optimizer_steps + self.skipped_steps) % self.check_finite_every == 0:
            self._queue_check()
        self.check_finite(wait=False)

    def _skipped_by_scaler(self) -> bool:
        """fp16: whether the GradScaler skipped the step just taken (it lowers the scale when it does), from one read
        of the scale per optimizer step, a host synchronisation; the scale before the step is the one read after the
        previous step. Without a GradScaler (fp32, bf16), False, with no read."""
        if not self.scaler.is_enabled():
            return False
        before, self._scale = self._scale, self.scaler.get_scale()
        return self._scale < before

    def _queue_check(self) -> None:
        if self._nonfinite is None:
            return
        flag, event = self._nonfinite, None
        if flag.device.type == "cuda":  # copy the flag without waiting; read it once the copy has happened
            host = torch.empty((), dtype=torch.bool, pin_memory=True)
            flag, event = host.copy_(flag, non_blocking=True), torch.cuda.Event()
            event.record()
        self._checks.append((flag, event, self._unchecked_from, self.micro_batches - 1))
        self._nonfinite, self._unchecked_from = None, self.micro_batches

    def check_finite(self, *, wait: bool = True) -> None:
        """Raise NonFiniteLossError if a checked loss was NaN or inf; `wait=True` also checks the losses since the
        last check, waiting for the device (what `end_epoch` does)."""
        if wait:
            self._queue_check()
        while self._checks:
            flag, event, first, last = self._checks[0]
            if event is not None and not wait and not event.query():
                return  # the device has not got there yet: look again at the next optimizer step
            if event is not None:
                event.synchronize()
            self._checks.pop(0)
            if bool(flag):
                raise NonFiniteLossError(
                    f"the loss was NaN or infinite in micro-batches {first}-{last} (by optimizer step "
                    f"{self.optimizer_steps}, precision {self.precision}); lower the learning rate, check the inputs "
                    "for NaNs, or use fp32/bf16"
                )

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
        self._scale = self.scaler.get_scale()
        self.micro_batches = state["micro_batches"]
        self.optimizer_steps = state["optimizer_steps"]
        self.skipped_steps = state["skipped_steps"]
        self._unchecked_from = self.micro_batches


def gan_sr_step(
    generator: nn.Module,
    discriminator: nn.Module,
    *,
    device: torch.device | str,
    adversarial_weight: float = 1e-3,
    learning_rate: float = 1e-4,
) -> Callable[..., dict[str, torch.Tensor]]:
    """One GAN super-resolution iteration on one float (LR, HR) batch: a discriminator step on real HR against the
    generator's output, then a generator step (L1 + a small adversarial term). Both models use the same batch, so a
    single loader feeds them; pass `real_hr` to give the discriminator other real images (a second loader's).
    Returns both losses detached on the device (read them with float() only when you log)."""
    g_optimizer = torch.optim.Adam(generator.parameters(), lr=learning_rate, betas=(0.9, 0.99))
    d_optimizer = torch.optim.Adam(discriminator.parameters(), lr=learning_rate, betas=(0.9, 0.99))
    bce = nn.BCEWithLogitsLoss()
    device = torch.device(device)

    def step(batch: tuple[torch.Tensor, torch.Tensor], real_hr: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
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
        return {"d_loss": d_loss.detach(), "g_loss": g_loss.detach()}

    return step
