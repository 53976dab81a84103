"""Training: one correct mixed-precision step with gradient accumulation, used by every notebook that trains."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
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
    device: torch.device | str,
    adversarial_weight: float = 1e-3,
    lr: float = 1e-4,
) -> Callable[[tuple[torch.Tensor, torch.Tensor]], dict[str, float]]:
    """One GAN super-resolution iteration on one (LR, HR) batch: a discriminator step on real HR against the
    generator's output, then a generator step (L1 + a small adversarial term). Both models use the same batch,
    so a single loader feeds them."""
    g_optimizer = torch.optim.Adam(generator.parameters(), lr=lr, betas=(0.9, 0.99))
    d_optimizer = torch.optim.Adam(discriminator.parameters(), lr=lr, betas=(0.9, 0.99))
    bce = nn.BCEWithLogitsLoss()
    device = torch.device(device)

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, float]:
        lr_images, hr = (t.to(device, non_blocking=True) for t in batch)
        lr_images, hr = (t.float().div_(255) if t.dtype == torch.uint8 else t for t in (lr_images, hr))
        fake = generator(lr_images)
        d_optimizer.zero_grad(set_to_none=True)
        real_logits, fake_logits = discriminator(hr), discriminator(fake.detach())
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
    context: Any = None,
) -> list[dict[str, Any]]:
    """Train `model` for `epochs` passes over `loader` (or `max_steps` micro-batches), evaluating every `eval_every`
    epochs; checkpoint atomically every epoch and when interrupted; with `resume`, continue exactly where the last
    checkpoint stopped. Returns the history (one dict per epoch), also written to `history.json`.

    Exact resumption needs a loader whose randomness comes from its `generator` attribute and the global RNGs
    (every loader in helpers does): the checkpoint keeps the generator's state at the start of the epoch and the
    number of batches done, and a resumed run replays the epoch's draws up to there.

    Under torchrun, pass the DDP-wrapped model and the DistributedContext: only rank 0 writes checkpoints, history
    and progress, the training loss is averaged over ranks, and a DistributedSampler is told the epoch.
    """
    from tqdm import tqdm

    from .distributed import DistributedContext, all_reduce_sum, unwrap_model

    context = context or DistributedContext(device=torch.device(device))
    is_main_process = context.is_main
    device = torch.device(device)
    plain_model = unwrap_model(model)
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
        plain_model.load_state_dict(state["model"])
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
    resume_point: tuple[int, int, dict[str, Any] | None] = (-1, 0, None)

    def checkpoint(rng: dict[str, Any] | None = None) -> None:
        if folder is None or not is_main_process:
            return
        save_checkpoint(
            {
                "model": plain_model.state_dict(),
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
            sampler = getattr(loader, "sampler", None)
            if hasattr(sampler, "set_epoch"):
                sampler.set_epoch(epoch)  # DistributedSampler: a new shuffle each epoch, the same on every rank
            model.train()
            losses: list[float] = []
            iterator = iter(loader)
            if resume and epoch == start_epoch:
                for _ in range(skip_batches):  # replay this epoch's draws up to where the checkpoint was taken
                    next(iterator)
                set_rng_states(resume_rng)
            resume_point = (batch_in_epoch, step.micro_batches, rng_states())
            started = time.perf_counter()
            while max_steps is None or step.micro_batches < max_steps:
                if step.pending == 0 and resume_point[0] != batch_in_epoch:
                    resume_point = (batch_in_epoch, step.micro_batches, rng_states())
                try:
                    inputs, targets = next(iterator)
                except StopIteration:
                    break
                losses.append(step(inputs, targets))
                batch_in_epoch += 1
                if step.pending == 0:  # an optimizer step just completed: a consistent point to resume from
                    resume_point = (batch_in_epoch, step.micro_batches, rng_states())
                bar.update(1)
                if after_step is not None:
                    after_step(step.micro_batches)
            step.flush()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            trained_seconds += time.perf_counter() - started
            loss_sum, loss_count = all_reduce_sum([sum(losses), len(losses)], context)
            record: dict[str, Any] = {
                "epoch": epoch + 1,
                "micro_batches": step.micro_batches,
                "optimizer_steps": step.optimizer_steps,
                "skipped_steps": step.skipped_steps,
                "train_loss": loss_sum / max(loss_count, 1),
                "trained_seconds": trained_seconds,
                "lr": optimizer.param_groups[0]["lr"],
            }
            if evaluate is not None and ((epoch + 1) % eval_every == 0 or epoch + 1 == epochs):
                record.update(evaluate(plain_model))
            history.append(record)
            bar.set_postfix({k: round(v, 4) for k, v in record.items() if isinstance(v, float)}, refresh=False)
            epoch, batch_in_epoch = epoch + 1, 0
            epoch_generator_state = generator.get_state() if generator is not None else None
            checkpoint()
            write_history()
    except KeyboardInterrupt:
        # Mid-epoch: keep the epoch's starting generator state and go back to the last completed optimizer step
        # (the gradients of an unfinished accumulation group are not saved), with the global RNGs as they were.
        if resume_point[2] is not None:
            batch_in_epoch, step.micro_batches, point_rng = resume_point
            step.pending = 0
            checkpoint(rng=point_rng)
        write_history()
        raise
    finally:
        bar.close()
    return history


# --- evaluation --------------------------------------------------------------------------------------------------


@torch.no_grad()
def evaluate_sr(
    model: nn.Module, dataset: Any, scale: int, device: torch.device | str, context: Any = None
) -> dict[str, Any]:
    """PSNR-Y and SSIM-Y (standard protocol) of the model and of bicubic on whole images; means and per-image values.

    Under torchrun each rank evaluates its share of the images and the means are reduced over ranks (the
    per-image lists are this rank's).
    """
    from .distributed import DistributedContext, all_reduce_sum, shard_range
    from .metrics import bicubic_upscale, psnr_y, ssim_y

    device = torch.device(device)
    context = context or DistributedContext(device=device)
    was_training = model.training
    model.eval()
    rows = []
    for index in range(len(dataset))[shard_range(len(dataset), context)]:
        lr, hr = dataset[index]
        lr, hr = lr[None].to(device), hr[None].to(device)
        sr = model(lr).float().clamp(0, 1)
        bicubic = bicubic_upscale(lr, scale)
        rows.append(
            (psnr_y(sr, hr, scale).item(), ssim_y(sr, hr, scale).item(),
             psnr_y(bicubic, hr, scale).item(), ssim_y(bicubic, hr, scale).item())
        )  # fmt: skip
    model.train(was_training)
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
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, preprocess: nn.Module, device: torch.device | str,
    batch_size: int = 500, precision: str = "fp32", context: Any = None,
) -> dict[str, float]:  # fmt: skip
    """Top-1 accuracy of `model` on uint8 images, preprocessed on the device (each rank counts its share, then the
    counts are summed over ranks)."""
    from .distributed import DistributedContext, all_reduce_sum, shard_range

    device = torch.device(device)
    context = context or DistributedContext(device=device)
    share = shard_range(len(images), context)
    images, labels = images[share], labels[share]
    was_training = model.training
    model.eval()
    correct = 0
    dtype = autocast_dtype(precision)
    for start in range(0, len(images), batch_size):
        batch = preprocess(images[start : start + batch_size].to(device, non_blocking=True))
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            logits = model(batch)
        correct += int((logits.argmax(1) == labels[start : start + batch_size].to(device)).sum())
    model.train(was_training)
    correct_total, count_total = all_reduce_sum([correct, len(images)], context)
    return {"top1": correct_total / max(count_total, 1)}


# --- recipes: the course's two training runs, sized by profile ---------------------------------------------------

SR_SIZES: dict[str, dict[str, Any]] = {
    # features/blocks of SmallEDSR, HR crop, batch, optimizer steps (= epochs x batches_per_epoch), peak LR
    "smoke": {"features": 8, "blocks": 1, "hr_crop": 32, "batch": 4, "epochs": 2, "batches_per_epoch": 2, "lr": 2e-3},
    "cpu": {"features": 32, "blocks": 8, "hr_crop": 96, "batch": 16, "epochs": 8, "batches_per_epoch": 100, "lr": 2e-3},
    "full": {"features": 64, "blocks": 16, "hr_crop": 192, "batch": 16, "epochs": 30, "batches_per_epoch": 500,
             "lr": 1e-3},
}  # fmt: skip
CIFAR_SIZES: dict[str, dict[str, Any]] = {
    "smoke": {"images": 256, "batch": 64, "epochs": 1, "lr": 0.1, "model": "small"},
    "cpu": {"images": None, "batch": 128, "epochs": 3, "lr": 0.2, "model": "resnet18"},
    "full": {"images": None, "batch": 512, "epochs": 10, "lr": 0.4, "model": "resnet18"},
}


@dataclass
class Recipe:
    """Everything one training run needs, built for a profile and a device."""

    task: str
    description: str
    model: nn.Module
    loader: Any
    optimizer: torch.optim.Optimizer
    scheduler: Any
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    evaluate: Callable[[nn.Module], dict[str, Any]]
    epochs: int
    precision: str
    data: str
    channels_last: bool = False
    eval_every: int = 1


def fastest_precision(device: torch.device) -> str:
    """bf16 where the device supports it (CUDA with bf16, or a CPU), else fp16 on CUDA."""
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16"


def sr_recipe(profile_name: str, device: torch.device, scale: int = 4, seed: int = 0, context: Any = None) -> Recipe:
    """SmallEDSR on BSDS300-train (or its stand-in) with paired crops from the decoded cache, evaluated on the test
    split (BSD100) by the standard protocol; on CUDA the crops are cut on the device (the zero-CPU pipeline)."""
    from .data import bsds300_split, prepare_bsds300
    from .datasets import CachedCropLoader, DecodedSRCache, DeviceSRCropLoader, SREvalDataset
    from .distributed import rank_seed
    from .env import seed_everything
    from .models import SmallEDSR

    sizes = SR_SIZES[profile_name]
    rank = context.rank if context is not None else 0
    seed_everything(seed)
    source = prepare_bsds300(progress=False)
    cache = DecodedSRCache(bsds300_split(source.root, "train"), scale=scale)
    loader_type = DeviceSRCropLoader if device.type == "cuda" else CachedCropLoader
    # each rank draws its own crops: a different stream per rank, reproducible from one seed
    loader = loader_type(cache, sizes["batch"], sizes["hr_crop"], sizes["batches_per_epoch"], rank_seed(seed, rank), device)
    model = SmallEDSR(scale, sizes["features"], sizes["blocks"]).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=sizes["lr"], betas=(0.9, 0.99))
    total = sizes["epochs"] * sizes["batches_per_epoch"]
    scheduler = make_scheduler(optimizer, "onecycle", total, sizes["lr"])
    test = SREvalDataset(source.root, scale=scale)
    return Recipe(
        task="sr",
        description=(
            f"SmallEDSR({sizes['features']} features, {sizes['blocks']} blocks) x{scale}, {sizes['hr_crop']}-px HR "
            f"crops, batch {sizes['batch']}, {total} steps, Adam + OneCycle, L1, fp32 on {device}"
        ),
        model=model,
        loader=loader,
        optimizer=optimizer,
        scheduler=scheduler,
        loss_fn=nn.L1Loss(),
        evaluate=lambda m: evaluate_sr(m, test, scale, device, context),
        epochs=sizes["epochs"],
        precision="fp32",
        data=source.describe(),
        eval_every=2 if profile_name != "smoke" else 1,
    )


def cifar_recipe(
    profile_name: str, device: torch.device, seed: int = 0, label_smoothing: float = 0.1, context: Any = None
) -> Recipe:
    """ResNet18 (CIFAR stem) on CIFAR-10 (or its stand-in) from a whole-dataset-on-device loader with kornia batch
    augmentation, SGD + OneCycle, label smoothing, mixed precision; top-1 on the test split after each epoch."""
    from .augment import cifar_train_augment, normalize_only
    from .data import load_cifar10, prepare_cifar10
    from .env import seed_everything
    from .loading import DeviceTensorLoader
    from .models import SmallConvNet, cifar_resnet18

    sizes = CIFAR_SIZES[profile_name]
    seed_everything(seed)
    source = prepare_cifar10(progress=False)
    images, labels = load_cifar10(source.root, train=True)
    test_images, test_labels = load_cifar10(source.root, train=False)
    if sizes["images"]:
        images, labels = images[: sizes["images"]], labels[: sizes["images"]]
        test_images, test_labels = test_images[: sizes["images"]], test_labels[: sizes["images"]]
    rank, world_size = (context.rank, context.world_size) if context is not None else (0, 1)
    loader = DeviceTensorLoader(images, labels, sizes["batch"], device, cifar_train_augment().to(device),
                                drop_last=True, seed=seed, rank=rank, world_size=world_size)  # fmt: skip
    model = (cifar_resnet18() if sizes["model"] == "resnet18" else SmallConvNet(width=16)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=sizes["lr"], momentum=0.9, nesterov=True, weight_decay=5e-4)
    scheduler = make_scheduler(optimizer, "onecycle", sizes["epochs"] * len(loader), sizes["lr"])
    precision = fastest_precision(device)
    preprocess = normalize_only().to(device)
    test_images, test_labels = test_images.to(device), test_labels.to(device)
    return Recipe(
        task="cifar",
        description=(
            f"{'ResNet18 (CIFAR stem)' if sizes['model'] == 'resnet18' else 'small CNN'}, {len(images)} images, "
            f"batch {sizes['batch']}, {sizes['epochs']} epochs, SGD + OneCycle (peak {sizes['lr']}), label smoothing "
            f"{label_smoothing}, {precision}, channels_last on {device}"
        ),
        model=model,
        loader=loader,
        optimizer=optimizer,
        scheduler=scheduler,
        loss_fn=nn.CrossEntropyLoss(label_smoothing=label_smoothing),
        evaluate=lambda m: evaluate_classifier(
            m, test_images, test_labels, preprocess, device, precision=precision, context=context
        ),
        epochs=sizes["epochs"],
        precision=precision,
        data=source.describe(),
        channels_last=True,
    )


def run_recipe(
    recipe: Recipe,
    checkpoint_dir: str | os.PathLike | None = None,
    resume: bool = False,
    progress: bool = True,
    context: Any = None,
) -> list[dict[str, Any]]:
    """Train a recipe with `fit` (checkpoints and history in `checkpoint_dir`; DDP when `context` has several ranks)."""
    from .distributed import wrap_model

    if recipe.channels_last:  # before DDP is built: DDP's gradient buckets follow the parameters' strides
        recipe.model.to(memory_format=torch.channels_last)
    model = wrap_model(recipe.model, context) if context is not None else recipe.model
    return fit(
        model, recipe.loader, epochs=recipe.epochs, device=next(recipe.model.parameters()).device,
        optimizer=recipe.optimizer, loss_fn=recipe.loss_fn, scheduler=recipe.scheduler, evaluate=recipe.evaluate,
        eval_every=recipe.eval_every, precision=recipe.precision, channels_last=recipe.channels_last,
        checkpoint_dir=checkpoint_dir, resume=resume, progress=progress, context=context,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Command line: python -m helpers.train sr|cifar [--profile P] [--checkpoint-dir D] [--resume] [--scale S]."""
    import argparse

    from .distributed import cleanup_distributed, init_distributed, local_main_first, rank_seed
    from .env import environment_report, format_environment_report, seed_everything
    from .profiles import resolve_profile

    parser = argparse.ArgumentParser(
        description="Train the course's SR or CIFAR model outside the notebooks (single process, or under torchrun)."
    )
    parser.add_argument("task", choices=["sr", "cifar"])
    parser.add_argument("--profile", default="auto", help="auto, smoke, cpu or full (COURSE_PROFILE overrides)")
    parser.add_argument("--checkpoint-dir", type=Path, default=None, help="default: runs/<task>-<profile>")
    parser.add_argument("--resume", action="store_true", help="continue from <checkpoint-dir>/last.pt")
    parser.add_argument("--scale", type=int, default=4, help="sr: 2, 3 or 4")
    args = parser.parse_args(argv)

    profile = resolve_profile(args.profile)
    context = init_distributed()
    device = context.device
    with local_main_first(context):  # one process per node downloads and writes data; the others then read it
        if args.task == "sr":
            recipe = sr_recipe(profile.name, device, args.scale, context=context)
        else:
            recipe = cifar_recipe(profile.name, device, context=context)
    seed_everything(rank_seed(0, context.rank))  # per-rank augmentation draws, reproducible
    folder = args.checkpoint_dir or Path("runs") / f"{args.task}-{profile.name}"
    say = print if context.is_main else (lambda *a, **k: None)
    say(profile.label(recipe.description))
    say(recipe.data)
    say(format_environment_report(environment_report(device)) + f" | {context.world_size} process(es)")
    try:
        history = run_recipe(recipe, folder, args.resume, context=context)
    except KeyboardInterrupt:
        say(f"\ninterrupted: checkpoint in {folder / 'last.pt'}; continue with --resume")
        return 130
    finally:
        cleanup_distributed()
    last = history[-1]
    shown = {k: round(v, 4) for k, v in last.items() if isinstance(v, float) and not k.startswith("per_image")}
    say(profile.label(f"after {last['trained_seconds']:.0f} s of training: {shown}"))
    say(f"history: {folder / 'history.json'}; checkpoint: {folder / 'last.pt'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
