"""A resumable trainer in three pieces, like torchvision's references: `restore` a checkpoint, `train_one_epoch`, and
`save_training_state`; `fit` is the short loop that joins them (with evaluation, history and DDP).

Copy with: step.py (the mixed-precision step), checkpoint.py (atomic checkpoints, RNG states), distributed.py
(DDP reductions; a no-op on one process) and atomic.py with safe_open.py (the history file).
Needs: numpy, torch, tqdm (the progress bar).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from .atomic import write_text_atomically
from .checkpoint import load_latest_checkpoint, load_state_into, rng_states, save_checkpoint, set_rng_states
from .distributed import DistributedContext, all_reduce_sum, unwrap_model
from .step import TrainStep

CHECKPOINT_NAME = "last.pt"
HISTORY_NAME = "history.json"


@dataclass
class TrainState:
    """Where a run stands: the part of a checkpoint that is not model, optimizer, scheduler or step state."""

    epoch: int = 0  # epochs completed
    batch_in_epoch: int = 0  # batches of the current epoch already trained on
    trained_seconds: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)
    loader_generator: torch.Tensor | None = None  # the loader's generator state at the start of the current epoch
    # (batch_in_epoch, micro_batches, global RNG states) at the last completed optimizer step: where Ctrl-C saves
    resume_point: tuple[int, int, dict[str, Any]] | None = None


def make_scheduler(
    optimizer: torch.optim.Optimizer, *, kind: str | None, total_steps: int, peak_learning_rate: float
) -> torch.optim.lr_scheduler.LRScheduler | None:
    """A learning-rate schedule stepped once per optimizer step: 'onecycle', 'cosine', or None for a constant rate."""
    if kind is None:
        return None
    if kind == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=peak_learning_rate, total_steps=max(total_steps, 1))
    if kind == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(total_steps, 1))
    raise ValueError(f"schedule must be 'onecycle', 'cosine' or None, not {kind!r}")


def save_training_state(
    folder: Path, state: TrainState, *, model: nn.Module, step: TrainStep, scheduler: Any = None
) -> Path:
    """Write `folder/last.pt` atomically: model, optimizer, scheduler, step counters, RNGs and `state`."""
    point = state.resume_point
    return save_checkpoint(
        {
            "model": unwrap_model(model).state_dict(),
            "optimizer": step.optimizer.state_dict(),
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "step": step.state_dict(),
            "epoch": state.epoch,
            "batch_in_epoch": state.batch_in_epoch,
            "loader_generator": state.loader_generator,
            "rng": point[2] if point is not None and point[0] == state.batch_in_epoch else rng_states(),
            "history": state.history,
            "trained_seconds": state.trained_seconds,
        },
        folder / CHECKPOINT_NAME,
    )


def restore(
    folder: Path, *, model: nn.Module, step: TrainStep, scheduler: Any = None, loader: Any = None
) -> tuple[TrainState, dict[str, Any]]:
    """Load `folder/last.pt` (or, with a warning, its newest complete fallback) into the model, optimizer,
    scheduler, step and the loader's generator; a checkpoint of another model is a CheckpointError saying what differs.

    Returns the TrainState and the global RNG states to restore once the interrupted epoch's batches are replayed.
    """
    saved, used = load_latest_checkpoint(folder / CHECKPOINT_NAME, map_location=step.device)
    load_state_into(unwrap_model(model), saved["model"], path=used, what="model")
    load_state_into(step.optimizer, saved["optimizer"], path=used, what="optimizer")
    load_state_into(step, saved["step"], path=used, what="training step")
    if scheduler is not None and saved.get("scheduler") is not None:
        load_state_into(scheduler, saved["scheduler"], path=used, what="schedule")
    generator = getattr(loader, "generator", None)
    if generator is not None and saved.get("loader_generator") is not None:
        generator.set_state(saved["loader_generator"])
    state = TrainState(
        epoch=saved["epoch"], batch_in_epoch=saved["batch_in_epoch"], trained_seconds=saved["trained_seconds"],
        history=list(saved["history"]), loader_generator=saved.get("loader_generator"),
    )  # fmt: skip
    return state, saved["rng"]


def train_one_epoch(
    model: nn.Module,
    loader: Iterable,
    step: TrainStep,
    state: TrainState,
    *,
    replay_rng: dict[str, Any] | None = None,
    max_steps: int | None = None,
    time_limit_s: float | None = None,
    after_step: Callable[[int], None] | None = None,
    bar: Any = None,
) -> list[float]:
    """One pass over `loader`, each batch through `step`; returns the losses.

    The first `state.batch_in_epoch` batches are drawn and skipped (a resumed epoch replays its draws), then the
    global RNGs are set to `replay_rng`. `state.resume_point` follows every completed optimizer step. The epoch ends
    early after `max_steps` micro-batches in all, or `time_limit_s` seconds of training in all.
    """
    sampler = getattr(loader, "sampler", None)
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(state.epoch)  # DistributedSampler: a new shuffle each epoch, the same on every rank
    model.train()
    iterator = iter(loader)
    for _ in range(state.batch_in_epoch):
        next(iterator)
    if replay_rng is not None:
        set_rng_states(replay_rng)
    state.resume_point = (state.batch_in_epoch, step.micro_batches, rng_states())
    losses: list[float] = []
    started = time.perf_counter()
    try:
        for inputs, targets in iterator:
            losses.append(step(inputs, targets))
            state.batch_in_epoch += 1
            if step.pending == 0:  # an optimizer step just completed: a consistent point to resume from
                state.resume_point = (state.batch_in_epoch, step.micro_batches, rng_states())
            if bar is not None:
                bar.update(1)
            if after_step is not None:
                after_step(step.micro_batches)
            if max_steps is not None and step.micro_batches >= max_steps:
                break
            if time_limit_s is not None and state.trained_seconds + time.perf_counter() - started >= time_limit_s:
                break
        step.flush()
        if step.device.type == "cuda":
            torch.cuda.synchronize(step.device)
    finally:
        state.trained_seconds += time.perf_counter() - started
    return losses


def _write(folder: Path, state: TrainState, *, model: nn.Module, step: TrainStep, scheduler: Any) -> None:
    save_training_state(folder, state, model=model, step=step, scheduler=scheduler)
    write_text_atomically(folder / HISTORY_NAME, json.dumps(state.history, indent=2))


def _close_epoch(
    state: TrainState, step: TrainStep, losses: list[float], context: DistributedContext, *,
    evaluate: Callable[[nn.Module], dict[str, float]] | None, model: nn.Module, bar: Any,
) -> None:  # fmt: skip
    """Record the finished epoch in the history (evaluated when `evaluate` is given) and move the state past it."""
    record = _epoch_record(state, step, losses, context)
    if evaluate is not None:
        record.update(evaluate(unwrap_model(model)))
    state.history.append(record)
    bar.set_postfix({k: round(v, 4) for k, v in record.items() if isinstance(v, float)}, refresh=False)
    state.epoch, state.batch_in_epoch, state.resume_point = state.epoch + 1, 0, None


def _epoch_record(state: TrainState, step: TrainStep, losses: list[float], context: DistributedContext) -> dict:
    loss_sum, loss_count = all_reduce_sum([sum(losses), len(losses)], context)
    return {
        "epoch": state.epoch + 1,
        "micro_batches": step.micro_batches,
        "optimizer_steps": step.optimizer_steps,
        "skipped_steps": step.skipped_steps,
        "train_loss": loss_sum / max(loss_count, 1),
        "trained_seconds": state.trained_seconds,
        "learning_rate": step.optimizer.param_groups[0]["lr"],
    }


def fit(
    model: nn.Module,
    loader: Any,
    step: TrainStep,
    *,
    epochs: int,
    scheduler: Any = None,
    evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
    eval_every: int = 1,
    checkpoint_dir: str | os.PathLike | None = None,
    resume: bool = False,
    max_steps: int | None = None,
    time_limit_s: float | None = None,
    after_step: Callable[[int], None] | None = None,
    progress: bool = True,
    context: DistributedContext | None = None,
) -> list[dict[str, Any]]:
    """Train `epochs` passes over `loader` (at most `max_steps` micro-batches, `time_limit_s` seconds of training),
    evaluating every `eval_every` epochs, checkpointing every epoch and on Ctrl-C, resuming exactly; return the history.

    Exact resumption needs a loader whose randomness comes from its `generator` attribute and the global RNGs (the
    loaders in loading.py and sr_cache.py do). Under torchrun pass the DDP-wrapped model and the context: only rank
    0 writes, losses and metrics are averaged over ranks, a DistributedSampler is told the epoch, and only
    `max_steps` ends a run early (ranks must stop together).
    """
    context = context or DistributedContext(device=step.device)
    time_limit_s = None if context.enabled else time_limit_s  # ranks timing themselves could stop apart: hang
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else None
    writes = folder is not None and context.is_main
    if resume and folder is None:
        raise ValueError("resume needs a checkpoint_dir")
    generator = getattr(loader, "generator", None)
    state, replay_rng = TrainState(loader_generator=generator.get_state() if generator is not None else None), None
    if resume:
        state, replay_rng = restore(folder, model=model, step=step, scheduler=scheduler, loader=loader)
    total = max_steps if max_steps is not None else epochs * len(loader)
    bar = tqdm(total=total, initial=step.micro_batches, desc="train", unit="step", disable=not (progress and context.is_main))
    try:
        while state.epoch < epochs and (max_steps is None or step.micro_batches < max_steps) and (
            time_limit_s is None or state.trained_seconds < time_limit_s
        ):
            losses = train_one_epoch(model, loader, step, state, replay_rng=replay_rng, max_steps=max_steps,
                                     time_limit_s=time_limit_s, after_step=after_step, bar=bar)  # fmt: skip
            replay_rng = None
            due = evaluate is not None and ((state.epoch + 1) % eval_every == 0 or state.epoch + 1 == epochs)
            _close_epoch(state, step, losses, context, evaluate=evaluate if due else None, model=model, bar=bar)
            state.loader_generator = generator.get_state() if generator is not None else None  # the next epoch's
            if writes:
                _write(folder, state, model=model, step=step, scheduler=scheduler)
    except KeyboardInterrupt:
        # Mid-epoch: go back to the last completed optimizer step (an unfinished accumulation group's gradients are
        # not saved), with the epoch's starting generator state and the global RNGs as they were at that step.
        if writes and state.resume_point is not None:
            state.batch_in_epoch, step.micro_batches, _ = state.resume_point
            step.pending = 0
            _write(folder, state, model=model, step=step, scheduler=scheduler)
        raise
    finally:
        bar.close()
    return state.history
