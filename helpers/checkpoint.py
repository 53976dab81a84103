"""Checkpoints that survive crashes: written atomically (the previous one kept), loaded with `weights_only=True`,
with every global RNG state so that a resumed run continues exactly.

Copy alone: needs only numpy and torch.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read: corrupt, truncated, or not a checkpoint of this trainer."""


def rng_states() -> dict[str, Any]:
    """Every global RNG's state (Python, NumPy, torch CPU and CUDA) in a form torch.load(weights_only=True) accepts."""
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
        raise CheckpointError(f"{path}: not a checkpoint of this trainer (missing {sorted(missing)})")
    return state
