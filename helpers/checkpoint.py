"""Checkpoints that survive crashes: written atomically (the previous one kept), loaded with `weights_only=True`,
with every global RNG state so that a resumed run continues exactly; resuming falls back to the newest complete
file when the last one is missing or damaged, and a checkpoint of another model is a clear error, not a traceback.

Example:
    >>> import tempfile
    >>> model = torch.nn.Linear(2, 1)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = save_checkpoint({"model": model.state_dict(), "epoch": 3}, Path(tmp) / "last.pt")
    ...     state = load_checkpoint(Path(tmp) / "last.pt", required=("model", "epoch"))
    >>> state["epoch"], torch.equal(state["model"]["weight"], model.weight)
    (3, True)

Copy alone.
Needs: numpy, torch.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import shutil
import stat
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

# What trainer.py saves; a file without one of them is not a checkpoint it can resume from.
TRAINER_KEYS = ("model", "optimizer", "step", "epoch", "batch_in_epoch", "rng", "history", "trained_seconds", "run")


class CheckpointError(RuntimeError):
    """A checkpoint cannot be used (missing, corrupt, truncated, not of this trainer and model) or saved (a folder or
    FIFO where it goes)."""


def rng_states() -> dict[str, Any]:
    """Every global RNG's state (Python, NumPy, torch CPU and CUDA) in a form torch.load(weights_only=True) accepts."""
    state = np.random.get_state()
    assert isinstance(state, tuple)  # legacy=True (the default) and the global MT19937 give the tuple form
    kind, keys, position, has_gauss, cached = state
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


def validate_rng_states(states: Any, *, path: str | os.PathLike) -> None:
    """Raise CheckpointError unless `states` is what `rng_states` writes (tried by setting it, then putting the
    current states back)."""
    current = rng_states()
    try:
        set_rng_states(states)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as error:
        raise CheckpointError(
            f"{path}: the saved RNG states are of an older or foreign format ({type(error).__name__}: "
            f"{str(error)[:100]}); this checkpoint cannot be resumed exactly: start without --resume"
        ) from error
    finally:
        set_rng_states(current)


def check_run_config(saved: Any, current: dict[str, Any], *, path: str | os.PathLike) -> None:
    """Raise CheckpointError naming every setting where the checkpoint's run configuration differs from this run's."""
    if not isinstance(saved, dict):
        raise CheckpointError(
            f"{path}: the saved run configuration is not a dict ({type(saved).__name__}): a "
            "checkpoint of another format; start without --resume"
        )
    differs = [
        f"{key}: saved {saved.get(key)!r}, this run {current.get(key)!r}"
        for key in sorted(set(saved) | set(current))
        if saved.get(key) != current.get(key)
    ]
    if differs:
        raise CheckpointError(
            f"{path}: this checkpoint was saved by another run configuration ({'; '.join(differs)}); resume with the "
            "settings it was saved with, or use another checkpoint folder to start afresh"
        )


def _temporary(path: Path) -> Path:
    return path.with_name(path.name + ".tmp")


def _previous(path: Path) -> Path:
    return path.with_name(path.stem + ".previous.pt")


def save_checkpoint(state: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write a checkpoint atomically: to `*.tmp` (flushed to disk), then the old one becomes `*.previous.pt`, then
    a rename. A crash at any point leaves at least one complete checkpoint that `load_latest_checkpoint` finds. A
    folder or FIFO at any of the three names is a CheckpointError before anything is written or moved."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file where a folder of the path goes, or a folder above that cannot be written
        raise CheckpointError(
            f"{path}: its folder cannot be made ({error.strerror}: {error.filename}); the checkpoint was not saved: "
            "move what is in the way, make the folder above writable, or save the checkpoints to another folder"
        ) from error
    temporary = _temporary(path)
    for name in (path, temporary, _previous(path)):  # before anything is written or moved aside
        if (what := _not_a_file(name)) is not None:
            raise CheckpointError(
                f"{name}: is {what}, not a checkpoint file; the checkpoint was not saved and nothing "
                f"was moved: move it away, or save the checkpoints to another folder"
            )
    try:
        with _open_scratch(temporary) as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before any rename makes them the checkpoint
    except BaseException as error:
        full = _disk_full(error, path.parent)  # asked before the partial file frees its space
        with contextlib.suppress(OSError):
            temporary.unlink()  # a partial file must not fill the disk, nor pass for a complete checkpoint
        if isinstance(error, OSError) and error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise CheckpointError(
                f"{path}: {path.parent} cannot be written ({error.strerror}); the checkpoint was not saved and the "
                "previous one is intact: make the folder writable, or save the checkpoints to another folder"
            ) from error
        if full:
            raise OSError(
                errno.ENOSPC,
                f"{path}: the disk is full: the checkpoint was not saved (its partial "
                f"{temporary.name} is removed; the previous checkpoint is intact); free space and rerun "
                "with --resume",
            ) from error
        raise
    if path.exists():
        os.replace(path, _previous(path))
    os.replace(temporary, path)
    return path


def _not_a_file(path: Path) -> str | None:
    """What stands at `path` when it is neither a regular file nor a link ('a folder', 'a FIFO' ...), else None."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    return _what(mode)


def _open_checkpoint(path: Path) -> Any:
    """`path` open for reading when it is a regular file (a link to one is fine), else CheckpointError saying what is
    there: the open is non-blocking and checked with fstat, so a FIFO or /dev/zero is never read (safe_open.py's
    check, written out so this module copies alone)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        if not os.path.lexists(path):
            raise CheckpointError(f"{path}: no such checkpoint; start without --resume to train from scratch") from None
        if error.errno not in (errno.ENOENT, errno.ENXIO):  # permission denied, an I/O error ...
            raise CheckpointError(f"{path}: cannot be read ({error.strerror}); resume from another") from error
        what = "a link to nothing" if error.errno == errno.ENOENT else _what(os.stat(path).st_mode)  # ENXIO: a socket
        raise CheckpointError(
            f"{path}: is {what}, not a checkpoint file: move it away, or resume from another"
        ) from None
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        what = _what(mode) + (" (through a link)" if os.path.islink(path) else "")
        raise CheckpointError(f"{path}: is {what}, not a checkpoint file: move it away, or resume from another")
    return os.fdopen(descriptor, "rb")


def _what(mode: int) -> str:
    """'a folder', 'a FIFO', 'a character device' ... for what a `st_mode` says is not a regular file."""
    kinds = [(stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device")]
    kinds.append((stat.S_ISSOCK, "a socket"))
    return next((phrase for test, phrase in kinds if test(mode)), "a special file")


def _open_scratch(path: Path) -> Any:
    """Open a fresh `path` for writing without following a link planted there: a stale file or link of that name is
    removed first (unlink removes a link itself, never its target), then created exclusively with O_NOFOLLOW."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(path, flags, 0o644)
    except FileExistsError as error:
        raise OSError(
            errno.EEXIST,
            f"{path}: something was created here while the checkpoint was being saved "
            "(another process, or a planted link): remove it and save again",
        ) from error
    return os.fdopen(descriptor, "wb")


def _disk_full(error: BaseException | None, folder: Path) -> bool:
    """True for ENOSPC/EDQUOT, and for torch's own write errors ("unexpected pos", no errno) when the disk has under
    1 MiB left."""
    if isinstance(error, RuntimeError) and not isinstance(error, OSError):
        with contextlib.suppress(OSError):
            if shutil.disk_usage(folder).free < 2**20:
                return True
    while error is not None:
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            return True
        error = error.__cause__ or error.__context__
    return False


def load_checkpoint(
    path: str | os.PathLike, map_location: str | torch.device = "cpu", *, required: tuple[str, ...] = TRAINER_KEYS
) -> dict[str, Any]:
    """Load a checkpoint with weights_only=True, or raise CheckpointError naming the file and what to do."""
    path = Path(path)
    try:
        with _open_checkpoint(path) as f:
            state = torch.load(f, map_location=map_location, weights_only=True)
    except CheckpointError:
        raise
    except Exception as error:  # noqa: BLE001 (torch raises several types for damaged files)
        previous = _previous(path)
        hint = f"resume from {previous}, the checkpoint before it" if previous.is_file() else "delete it to start over"
        raise CheckpointError(
            f"{path}: cannot read the checkpoint ({type(error).__name__}: {str(error)[:200]}); it is corrupt or "
            f"truncated: {hint}"
        ) from error
    missing = set(required) - set(state if isinstance(state, dict) else ())
    if missing:
        older = isinstance(state, dict) and len(missing) < len(required)
        raise CheckpointError(
            f"{path}: not a checkpoint of this trainer (missing {sorted(missing)})"
            + ("; an older version of this trainer or another program wrote it" if older else "")
            + "; point the checkpoint folder at one this trainer wrote, or start without --resume"
        )
    return state


def load_latest_checkpoint(
    path: str | os.PathLike, map_location: str | torch.device = "cpu"
) -> tuple[dict[str, Any], Path]:
    """Load `path`, or when it is missing or damaged the newest complete fallback, warning which: `*.tmp` (a save
    interrupted before its rename) then `*.previous.pt` (the one before). Returns (state, the file used)."""
    path = Path(path)
    fallbacks = {
        _temporary(path): "a complete checkpoint whose save was interrupted before its rename",
        _previous(path): "the checkpoint before it; the work after it is trained again",
    }
    problems = []
    for candidate in (path, *fallbacks):
        try:
            state = load_checkpoint(candidate, map_location)
        except CheckpointError as error:
            problems.append(str(error))
            continue
        if candidate != path:
            warnings.warn(f"{problems[0]}; resuming from {candidate}: {fallbacks[candidate]}", stacklevel=2)
        return state, candidate
    if not any(p.exists() for p in (path, *fallbacks)):
        raise CheckpointError(problems[0])
    raise CheckpointError(f"no usable checkpoint: {' | '.join(problems)}")


def _module_difference(module: torch.nn.Module, saved: Any) -> str | None:
    """What keeps `saved` from loading into `module` (missing, unexpected or resized tensors), or None."""
    if not isinstance(saved, dict):
        return f"a state dict was expected, found {type(saved).__name__}"
    own = module.state_dict()
    missing = [k for k in own if k not in saved]
    unexpected = [k for k in saved if k not in own]
    resized = [
        f"{k}: saved {tuple(saved[k].shape)}, here {tuple(v.shape)}"
        for k, v in own.items()
        if k in saved and isinstance(saved[k], torch.Tensor) and saved[k].shape != v.shape
    ]
    found = [
        (f"{len(keys)} {label}", keys)
        for label, keys in (("missing", missing), ("unexpected", unexpected), ("of another shape", resized))
        if keys
    ]
    listed = [f"{count} ({', '.join(keys[:3])}{', ...' if len(keys) > 3 else ''})" for count, keys in found]
    return "; ".join(listed) or None


def load_state_into(target: Any, saved: Any, *, path: str | os.PathLike, what: str) -> None:
    """`target.load_state_dict(saved)` for a model, optimizer or scheduler, or a CheckpointError naming the file and
    what differs (for a model: the missing, unexpected and resized tensors)."""
    problem = _module_difference(target, saved) if isinstance(target, torch.nn.Module) else None
    if problem is None:
        try:
            target.load_state_dict(saved)
            return
        except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as error:
            problem = f"{type(error).__name__}: {str(error)[:300]}"
    raise CheckpointError(
        f"{path}: the saved {what} does not fit this {what} ({problem}); it was saved by another model or other "
        "settings: resume with the settings it was saved with, or use another checkpoint folder to start afresh"
    )
