"""Training: one correct mixed-precision step with gradient accumulation, used by every notebook that trains."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
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
        device: torch.device | str,
        precision: str = "fp32",
        accumulation_steps: int = 1,
        channels_last: bool = False,
        scheduler: Any = None,
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


# --- checkpoints -------------------------------------------------------------------------------------------------


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read: corrupt, truncated, or not a checkpoint of this trainer."""


def rng_states() -> dict[str, Any]:
    """Every global RNG's state (Python, NumPy, torch CPU and CUDA) in a form torch.load(weights_only=True) accepts."""
    import random

    import numpy as np

    kind, keys, position, has_gauss, cached = np.random.get_state()
    states: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [kind, torch.from_numpy(keys.astype("int64")), position, has_gauss, cached],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict[str, Any]) -> None:
    """Restore what `rng_states` captured."""
    import random

    import numpy as np

    python_state = states["python"]
    random.setstate((python_state[0], tuple(python_state[1]), python_state[2]))
    kind, keys, position, has_gauss, cached = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype("uint32"), position, has_gauss, cached))
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def save_checkpoint(state: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write a checkpoint atomically: to a temporary file, then the old one becomes `*.previous.pt`, then a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    torch.save(state, temporary)
    if path.exists():
        os.replace(path, path.with_name(path.stem + ".previous.pt"))
    os.replace(temporary, path)
    return path


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint with weights_only=True, or raise CheckpointError naming the file and what to do."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint; start without --resume to train from scratch")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # noqa: BLE001 (torch raises several types for damaged files)
        previous = path.with_name(path.stem + ".previous.pt")
        hint = f"resume from {previous}, the checkpoint before it" if previous.is_file() else "delete it to start over"
        raise CheckpointError(
            f"{path}: cannot read the checkpoint ({type(error).__name__}: {str(error)[:200]}); it is corrupt or "
            f"truncated: {hint}"
        ) from error
    missing = {"model", "optimizer", "epoch", "batch_in_epoch", "rng"} - set(state if isinstance(state, dict) else ())
    if missing:
        raise CheckpointError(f"{path}: not a checkpoint of helpers.train (missing {sorted(missing)})")
    return state


# --- the trainer -------------------------------------------------------------------------------------------------


def make_scheduler(
    optimizer: torch.optim.Optimizer, kind: str | None, total_steps: int, max_lr: float
) -> torch.optim.lr_scheduler.LRScheduler | None:
    """An LR schedule stepped once per optimizer step: 'onecycle', 'cosine', or None for a constant rate."""
    if kind is None:
        return None
    if kind == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=max_lr, total_steps=max(total_steps, 1))
    if kind == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(total_steps, 1))
    raise ValueError(f"schedule must be 'onecycle', 'cosine' or None, not {kind!r}")


def fit(
    model: nn.Module,
    loader: Any,
    *,
    epochs: int,
    device: torch.device | str,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    scheduler: Any = None,
    evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
    eval_every: int = 1,
    precision: str = "fp32",
    accumulation_steps: int = 1,
    channels_last: bool = False,
    batch_transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    resume: bool = False,
    max_steps: int | None = None,
    after_step: Callable[[int], None] | None = None,
    progress: bool = True,
    is_main_process: bool = True,
) -> list[dict[str, Any]]:
    """Train `model` for `epochs` passes over `loader` (or `max_steps` micro-batches), evaluating every `eval_every`
    epochs; checkpoint atomically every epoch and when interrupted; with `resume`, continue exactly where the last
    checkpoint stopped. Returns the history (one dict per epoch), also written to `history.json`.

    Exact resumption needs a loader whose randomness comes from its `generator` attribute and the global RNGs
    (every loader in helpers does): the checkpoint keeps the generator's state at the start of the epoch and the
    number of batches done, and a resumed run replays the epoch's draws up to there.
    """
    from tqdm import tqdm

    device = torch.device(device)
    step = TrainStep(model, optimizer, loss_fn, device, precision, accumulation_steps, channels_last, scheduler,
                     batch_transform=batch_transform)  # fmt: skip
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else None
    generator = getattr(loader, "generator", None)
    history: list[dict[str, Any]] = []
    start_epoch, skip_batches, trained_seconds = 0, 0, 0.0
    resume_rng = None
    if resume:
        if folder is None:
            raise ValueError("resume needs a checkpoint_dir")
        state = load_checkpoint(folder / "last.pt", map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step.load_state_dict(state["step"])
        if scheduler is not None and state.get("scheduler") is not None:
            scheduler.load_state_dict(state["scheduler"])
        history = list(state["history"])
        start_epoch, skip_batches = state["epoch"], state["batch_in_epoch"]
        trained_seconds = state["trained_seconds"]
        if generator is not None and state.get("loader_generator") is not None:
            generator.set_state(state["loader_generator"])
        resume_rng = state["rng"]
    epoch, batch_in_epoch, epoch_generator_state = start_epoch, skip_batches, None
    group_start: tuple[int, int, dict[str, Any]] | None = None

    def checkpoint(rng: dict[str, Any] | None = None) -> None:
        if folder is None or not is_main_process:
            return
        save_checkpoint(
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict() if scheduler is not None else None,
                "step": step.state_dict(),
                "epoch": epoch,
                "batch_in_epoch": batch_in_epoch,
                "loader_generator": epoch_generator_state,
                "rng": rng if rng is not None else rng_states(),
                "history": history,
                "trained_seconds": trained_seconds,
            },
            folder / "last.pt",
        )

    def write_history() -> None:
        if folder is None or not is_main_process:
            return
        temporary = folder / "history.json.tmp"
        temporary.write_text(json.dumps(history, indent=2))
        os.replace(temporary, folder / "history.json")

    total = max_steps if max_steps is not None else epochs * len(loader)
    bar = tqdm(total=total, initial=step.micro_batches, desc="train", unit="step", disable=not (progress and is_main_process))
    try:
        for epoch in range(start_epoch, epochs):
            if max_steps is not None and step.micro_batches >= max_steps:
                break
            if epoch != start_epoch or not resume:
                batch_in_epoch = 0
            epoch_generator_state = generator.get_state() if generator is not None else None
            model.train()
            losses: list[float] = []
            iterator = iter(loader)
            if resume and epoch == start_epoch:
                for _ in range(skip_batches):  # replay this epoch's draws up to where the checkpoint was taken
                    next(iterator)
                set_rng_states(resume_rng)
            started = time.perf_counter()
            while max_steps is None or step.micro_batches < max_steps:
                if step.pending == 0:  # a group starts: where a resumed run would pick up
                    group_start = (batch_in_epoch, step.micro_batches, rng_states())
                try:
                    inputs, targets = next(iterator)
                except StopIteration:
                    break
                losses.append(step(inputs, targets))
                batch_in_epoch += 1
                bar.update(1)
                if after_step is not None:
                    after_step(step.micro_batches)
            step.flush()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            trained_seconds += time.perf_counter() - started
            record: dict[str, Any] = {
                "epoch": epoch + 1,
                "micro_batches": step.micro_batches,
                "optimizer_steps": step.optimizer_steps,
                "skipped_steps": step.skipped_steps,
                "train_loss": sum(losses) / max(len(losses), 1),
                "trained_seconds": trained_seconds,
                "lr": optimizer.param_groups[0]["lr"],
            }
            if evaluate is not None and ((epoch + 1) % eval_every == 0 or epoch + 1 == epochs):
                record.update(evaluate(model))
            history.append(record)
            bar.set_postfix({k: round(v, 4) for k, v in record.items() if isinstance(v, float)}, refresh=False)
            epoch, batch_in_epoch = epoch + 1, 0
            epoch_generator_state = generator.get_state() if generator is not None else None
            checkpoint()
            write_history()
    except KeyboardInterrupt:
        # Mid-epoch: keep the epoch's starting generator state and go back to the start of the unfinished
        # accumulation group (its gradients are not saved), with the global RNGs as they were there.
        if group_start is not None:
            batch_in_epoch, step.micro_batches, group_rng = group_start
            step.pending = 0
            checkpoint(rng=group_rng)
        write_history()
        raise
    finally:
        bar.close()
    return history
