"""The training steps a loader ladder times: a plain fp32 step that hands the model one image layout whichever layout
a rung sends, with the SR (L1, Adam) and the classification (cross-entropy, SGD) losses and optimisers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..images import to_unit_float


def plain_train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    memory_format: torch.memory_format = torch.contiguous_format,
) -> Callable[[Any], float]:
    """A plain fp32 step for benchmarking loaders: takes an (inputs, targets) batch on the device; uint8 tensors are
    made float in [0, 1] here, on the device, as a fast pipeline sends them, and image batches are put in
    `memory_format` (a no-op when they arrive in it). Every rung's batches thus reach the model in one layout: the
    decoded cache's RGBX crops are channels-last-strided, a PIL loader's NCHW, and a step on another layout runs at
    another speed, which made rungs of the same model measure different pre-made baselines."""

    def layout(tensor: torch.Tensor) -> torch.Tensor:
        tensor = to_unit_float(tensor)
        return tensor.contiguous(memory_format=memory_format) if tensor.ndim == 4 else tensor

    def step(batch: Any) -> float:
        inputs, targets = (layout(t) for t in batch)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    return step


def sr_train_step(model: nn.Module, learning_rate: float = 1e-4) -> Callable[[Any], float]:
    """The SR benchmark step: L1 loss, Adam, images in the contiguous NCHW layout whichever layout a rung sends."""
    return plain_train_step(model, torch.optim.Adam(model.parameters(), lr=learning_rate), nn.L1Loss())


def classification_train_step(model: nn.Module, learning_rate: float = 0.05) -> Callable[[Any], float]:
    """The classification benchmark step: cross-entropy, SGD with momentum, images in channels_last (the layout the
    on-device rungs' NormalizeToFloat hands over; the PIL rungs' NCHW batches are converted in the step)."""
    return plain_train_step(
        model,
        torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=0.9),
        nn.CrossEntropyLoss(),
        torch.channels_last,
    )
