"""A resumable trainer in three pieces, like torchvision's references: `restore` a checkpoint, `train_one_epoch`, and
`save_training_state`; `fit` is the short loop that joins them (with evaluation, history and DDP).

Example:
    >>> import tempfile
    >>> model = torch.nn.Linear(4, 1)
    >>> step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.MSELoss(), device="cpu")
    >>> data = [(torch.randn(8, 4), torch.randn(8, 1))] * 3
    >>> with tempfile.TemporaryDirectory() as tmp:  # fit = restore + train_one_epoch + save_training_state, repeated
    ...     history = fit(model, data, step, epochs=2, checkpoint_dir=tmp, progress=False)
    ...     state, _ = restore(Path(tmp), model=model, step=step)  # where a resumed run would start
    >>> len(history), state.epoch
    (2, 2)

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
from .checkpoint import (
    CheckpointError,
    check_run_config,
    load_latest_checkpoint,
    load_state_into,
    rng_states,
    save_checkpoint,
    set_rng_states,
    validate_rng_states,
)
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
    run: dict[str, Any] = field(default_factory=dict)  # the run's configuration, stored in every checkpoint
    time_capped: bool = False  # the time limit ended training before its planned steps
    # this epoch's loss sum and count from before a resume (saved at the resume point), so its train_loss averages
    # every batch of the epoch, as an uninterrupted run's does; and the current pass's losses, still on the device
    loss_sum: float = 0.0
    loss_count: int = 0
    pass_losses: list[torch.Tensor] = field(default_factory=list)
    pass_start: int = 0  # batch_in_epoch when the current pass over the loader began


def make_scheduler(
    optimizer: torch.optim.Optimizer, *, kind: str | None, total_steps: int, peak_learning_rate: float
) -> torch.optim.lr_scheduler.LRScheduler | None:
    """A learning-rate schedule for `total_steps` optimizer steps: 'onecycle', 'cosine', or None for a constant rate.

    Give it to TrainStep with scheduler_interval="step" (the default): it then steps after every optimizer step the
    GradScaler did not skip. For a per-epoch schedule build your own with total epochs and pass "epoch"."""
    if kind is None:
        return None
    if kind == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=peak_learning_rate, total_steps=max(total_steps, 1)
        )
    if kind == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(total_steps, 1))
    raise ValueError(f"schedule must be 'onecycle', 'cosine' or None, not {kind!r}")


def save_training_state(
    folder: Path, state: TrainState, *, model: nn.Module, step: TrainStep, scheduler: Any = None
) -> Path:
    """Write `folder/last.pt` atomically: model, optimizer, scheduler, step counters, RNGs and `state`."""
    point = state.resume_point
    done = min(max(state.batch_in_epoch - state.pass_start, 0), len(state.pass_losses))  # this pass's, up to here
    partial = float(torch.stack(state.pass_losses[:done]).float().sum()) if done else 0.0  # read only when saving
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
            "epoch_loss": [state.loss_sum + partial, state.loss_count + done],
            "run": state.run,
        },
        folder / CHECKPOINT_NAME,
    )


def restore(
    folder: Path,
    *,
    model: nn.Module,
    step: TrainStep,
    scheduler: Any = None,
    loader: Any = None,
    run: dict[str, Any] | None = None,
) -> tuple[TrainState, dict[str, Any]]:
    """Load `folder/last.pt` (or, with a warning, its newest complete fallback) into the model, optimizer,
    scheduler, step and the loader's generator; a checkpoint of another model, of another run configuration than
    `run`, or of an older or foreign format is a CheckpointError saying what differs.

    Returns the TrainState and the global RNG states to restore once the interrupted epoch's batches are replayed.
    """
    saved, used = load_latest_checkpoint(folder / CHECKPOINT_NAME, map_location=step.device)
    if run is not None:
        check_run_config(saved["run"], run, path=used)
    validate_rng_states(saved["rng"], path=used)
    load_state_into(unwrap_model(model), saved["model"], path=used, what="model")
    load_state_into(step.optimizer, saved["optimizer"], path=used, what="optimizer")
    load_state_into(step, saved["step"], path=used, what="training step")
    if scheduler is not None and saved.get("scheduler") is not None:
        load_state_into(scheduler, saved["scheduler"], path=used, what="schedule")
    generator = getattr(loader, "generator", None)
    if generator is not None and saved.get("loader_generator") is not None:
        generator.set_state(saved["loader_generator"])
    try:
        state = TrainState(
            epoch=int(saved["epoch"]),
            batch_in_epoch=int(saved["batch_in_epoch"]),
            history=list(saved["history"]),
            trained_seconds=float(saved["trained_seconds"]),
            loader_generator=saved.get("loader_generator"),
            run=dict(saved["run"]),
            loss_sum=float(saved.get("epoch_loss", [0.0, 0])[0]),
            loss_count=int(saved.get("epoch_loss", [0.0, 0])[1]),
        )
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{used}: a checkpoint of another format ({error}); start without --resume") from error
    return state, saved["rng"]


def saved_run_config(folder: str | os.PathLike) -> dict[str, Any] | None:
    """The run configuration stored in `folder/last.pt` (or its fallback), or None when there is no usable one."""
    try:
        saved, _ = load_latest_checkpoint(Path(folder) / CHECKPOINT_NAME)
    except CheckpointError:
        return None
    return saved["run"] if isinstance(saved["run"], dict) else None


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
) -> list[torch.Tensor]:
    """One pass over `loader`, each batch through `step`; returns the losses, still on the device.

    The first `state.batch_in_epoch` batches are drawn and skipped (a resumed epoch replays its draws), then the
    global RNGs are set to `replay_rng`. `state.resume_point` follows every completed optimizer step. The epoch ends
    early after `max_steps` optimizer steps in all (steps taken; steps the GradScaler skipped do not count), or
    `time_limit_s` seconds of training in all. Nothing here reads the loss on the host.
    """
    sampler = getattr(loader, "sampler", None)
    if sampler is not None and hasattr(sampler, "set_epoch"):
        sampler.set_epoch(state.epoch)  # DistributedSampler: a new shuffle each epoch, the same on every rank
    model.train()
    iterator = iter(loader)
    _replay(iterator, state.batch_in_epoch)
    if replay_rng is not None:
        set_rng_states(replay_rng)
    state.resume_point = (state.batch_in_epoch, step.micro_batches, rng_states())
    batches = len(loader) if hasattr(loader, "__len__") else None  # type: ignore[arg-type]
    losses: list[torch.Tensor] = []
    state.pass_losses, state.pass_start = losses, state.batch_in_epoch
    started = time.perf_counter()
    try:
        for inputs, targets in iterator:
            # the epoch's last batch closes its (maybe short) group: under DDP it is the one that all-reduces
            losses.append(step(inputs, targets, last=batches is not None and state.batch_in_epoch + 1 == batches).loss)
            state.batch_in_epoch += 1
            if step.pending == 0:  # an optimizer step just completed: a consistent point to resume from
                state.resume_point = (state.batch_in_epoch, step.micro_batches, rng_states())
            if bar is not None:
                bar.update(1)
            if after_step is not None:
                after_step(step.micro_batches)
            if max_steps is not None and step.optimizer_steps >= max_steps:
                break
            if time_limit_s is not None and state.trained_seconds + time.perf_counter() - started >= time_limit_s:
                state.time_capped = max_steps is None or step.optimizer_steps < max_steps
                break
        step.end_epoch()
        if step.device.type == "cuda":
            torch.cuda.synchronize(step.device)
    finally:
        state.trained_seconds += time.perf_counter() - started
    return losses


def _replay(iterator: Any, count: int) -> None:
    """Draw and drop the first `count` batches of a resumed epoch; a loader with fewer is a CheckpointError."""
    for drawn in range(count):
        try:
            next(iterator)
        except StopIteration:
            raise CheckpointError(
                f"the checkpoint was saved after batch {count} of its epoch, but this loader has only {drawn} batches "
                "per epoch: resume with the batches per epoch it was saved with, or start afresh"
            ) from None


def _write(folder: Path, state: TrainState, *, model: nn.Module, step: TrainStep, scheduler: Any) -> None:
    save_training_state(folder, state, model=model, step=step, scheduler=scheduler)
    write_text_atomically(folder / HISTORY_NAME, json.dumps(state.history, indent=2))


def _close_epoch(
    state: TrainState,
    step: TrainStep,
    losses: list[torch.Tensor],
    context: DistributedContext,
    *,
    evaluate: Callable[[nn.Module], dict[str, float]] | None,
    model: nn.Module,
    bar: Any,
) -> None:
    """Record the finished epoch in the history (evaluated when `evaluate` is given) and move the state past it."""
    record = _epoch_record(state, step, losses, context)
    if evaluate is not None:
        record.update(evaluate(unwrap_model(model)))
    state.history.append(record)
    bar.set_postfix({k: round(v, 4) for k, v in record.items() if isinstance(v, float)}, refresh=False)
    state.epoch, state.batch_in_epoch, state.resume_point = state.epoch + 1, 0, None
    state.loss_sum, state.loss_count, state.pass_losses, state.pass_start = 0.0, 0, [], 0


def _epoch_record(state: TrainState, step: TrainStep, losses: list[torch.Tensor], context: DistributedContext) -> dict:
    total = float(torch.stack(losses).float().sum()) if losses else 0.0  # the epoch's one read of the losses
    # a resumed epoch adds the losses saved before the resume (rank 0's, standing for every rank's under DDP)
    loss_sum, loss_count = all_reduce_sum([state.loss_sum + total, state.loss_count + len(losses)], context)
    return {
        "epoch": state.epoch + 1,
        "micro_batches": step.micro_batches,
        "optimizer_steps": step.optimizer_steps,
        "skipped_steps": step.skipped_steps,
        "train_loss": loss_sum / max(loss_count, 1),
        "trained_seconds": state.trained_seconds,
        "learning_rate": step.optimizer.param_groups[0]["lr"],
        "time_capped": state.time_capped,
    }


def run_config(loader: Any, step: TrainStep, context: DistributedContext, **extra: Any) -> dict[str, Any]:
    """What a checkpoint must match to be resumed: batches per epoch, precision, accumulation, world size, plus
    `extra` (a recipe's name and sizes)."""
    batches = len(loader) if hasattr(loader, "__len__") else None
    return {
        "batches_per_epoch": batches,
        "precision": step.precision,
        "accumulation_steps": step.accumulation_steps,
        "world_size": context.world_size,
        **extra,
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
    run: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Train `epochs` passes over `loader` (at most `max_steps` optimizer steps, `time_limit_s` seconds of
    training), evaluating every `eval_every` epochs, checkpointing every epoch and on Ctrl-C, resuming exactly; return
    the history (each record says `time_capped` when the time limit, not the planned steps, ended the run).

    Every checkpoint stores the run's configuration (`run_config`: batches per epoch, precision, world size, and the
    `run` entries you add, such as a recipe's name and sizes); resuming with another is a CheckpointError naming both.
    Exact resumption needs a loader whose randomness comes from its `generator` attribute and the global RNGs (the
    loaders in loading.py and sr_cache.py do). Under torchrun pass the DDP-wrapped model and the context: only rank
    0 writes, losses and metrics are averaged over ranks, a DistributedSampler is told the epoch, and only
    `max_steps` ends a run early (ranks must stop together).
    """
    # one piece: half of it is the signature and docstring; the body is the epoch loop and its save on Ctrl-C
    context = context or DistributedContext(device=step.device)
    time_limit_s = None if context.enabled else time_limit_s  # ranks timing themselves could stop apart: hang
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else None
    writes = folder is not None and context.is_main
    if resume and folder is None:
        raise ValueError("resume needs a checkpoint_dir")
    config, generator = run_config(loader, step, context, **(run or {})), getattr(loader, "generator", None)
    state, replay_rng = TrainState(loader_generator=generator.get_state() if generator is not None else None), None
    if resume and folder is not None:  # (resume without a folder raised above)
        state, replay_rng = restore(folder, model=model, step=step, scheduler=scheduler, loader=loader, run=config)
    state.run = config
    bar = tqdm(
        total=epochs * len(loader) if hasattr(loader, "__len__") else None,
        initial=step.micro_batches,
        desc="train",
        unit="batch",
        disable=not (progress and context.is_main),
    )
    try:
        while _more_to_train(state, step, epochs=epochs, max_steps=max_steps, time_limit_s=time_limit_s):
            losses = train_one_epoch(
                model,
                loader,
                step,
                state,
                replay_rng=replay_rng,
                max_steps=max_steps,
                time_limit_s=time_limit_s,
                after_step=after_step,
                bar=bar,
            )
            replay_rng = None
            due = evaluate is not None and ((state.epoch + 1) % eval_every == 0 or state.epoch + 1 == epochs)
            _close_epoch(state, step, losses, context, evaluate=evaluate if due else None, model=model, bar=bar)
            state.loader_generator = generator.get_state() if generator is not None else None  # the next epoch's
            if writes and folder is not None:  # writes implies a folder
                _write(folder, state, model=model, step=step, scheduler=scheduler)
        if bar.total and bar.n < bar.total:  # stopped by max_steps or the time limit: the bar ends at what ran
            bar.total = bar.n
            bar.refresh()
    except KeyboardInterrupt:
        _save_at_the_last_step(folder if writes else None, state, model=model, step=step, scheduler=scheduler)
        raise
    finally:
        bar.close()
    return state.history


def _more_to_train(
    state: TrainState, step: TrainStep, *, epochs: int, max_steps: int | None, time_limit_s: float | None
) -> bool:
    """True while epochs, optimizer steps and training seconds are all left."""
    return (
        state.epoch < epochs
        and (max_steps is None or step.optimizer_steps < max_steps)
        and (time_limit_s is None or state.trained_seconds < time_limit_s)
    )


def _save_at_the_last_step(
    folder: Path | None, state: TrainState, *, model: nn.Module, step: TrainStep, scheduler: Any
) -> None:
    """Ctrl-C mid-epoch: go back to the last completed optimizer step (an unfinished accumulation group's gradients
    are not saved), with the epoch's starting generator state and the global RNGs as they were at that step."""
    if folder is not None and state.resume_point is not None:
        state.batch_in_epoch, step.micro_batches, _ = state.resume_point
        step.pending = 0
        _write(folder, state, model=model, step=step, scheduler=scheduler)
