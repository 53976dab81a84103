"""An image folder as WebDataset tar shards, and reading them back for many machines: every rank gets its own
disjoint, equal share of the shards (reshuffled each epoch with a seed all ranks share), every DataLoader worker its
own share of the rank's shards, and samples are shuffled in a buffer. Files go into the shards as they are (the
JPEG bytes, not decoded pixels), so a shard is as small as the folder and streams from a network store in large
sequential reads instead of one small read per image.

Copy with: atomic.py with safe_open.py (the shards are published complete, once).
Needs: webdataset.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import webdataset as wds

from .atomic import build_once, sources_key

MANIFEST = "shards.json"


def write_shards(
    samples: Sequence[tuple[str, int]], dest: str | os.PathLike, *, per_shard: int = 256, classes: Sequence[str] = ()
) -> list[Path]:
    """Write (path, label) samples as tar shards of `per_shard` samples into the folder `dest` (once: a complete set
    made from the same files, by path, label, size and modification time, is kept), each sample the file's own bytes
    under its extension plus its label as "cls". Returns the shard paths in order."""
    samples = [(str(path), int(label)) for path, label in samples]
    made_from = sources_key(samples)

    def build(staging: Path) -> None:
        with wds.ShardWriter(str(staging / "shard-%06d.tar"), maxcount=per_shard, verbose=0) as sink:
            for key, (path, label) in enumerate(samples):
                extension = Path(path).suffix.lower().lstrip(".") or "bin"
                sink.write({"__key__": f"{key:08d}", extension: Path(path).read_bytes(), "cls": label})
        shards = sorted(p.name for p in staging.glob("shard-*.tar"))
        manifest = {"samples": len(samples), "per_shard": per_shard, "shards": shards, "classes": list(classes)}
        manifest["sources"] = made_from
        (staging / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")

    def complete(path: Path) -> bool:
        try:
            manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        same = manifest.get("samples") == len(samples) and manifest.get("per_shard") == per_shard
        return same and manifest.get("sources") == made_from

    build_once(dest, build, is_complete=complete)
    return shard_paths(dest)


def shard_paths(folder: str | os.PathLike) -> list[Path]:
    """The shards a write_shards folder holds, in order (from its manifest)."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise FileNotFoundError(f"{folder}: no complete shard set ({error}); write it with write_shards") from error
    return [folder / name for name in manifest["shards"]]


def rank_shards(shards: Sequence[Any], *, rank: int = 0, world_size: int = 1, seed: int = 0, epoch: int = 0) -> list:
    """This rank's shards for this epoch: all shards shuffled with (seed, epoch), the same order on every rank, then
    every world_size-th from position `rank`, cut so every rank gets the same count (so all take the same number of
    steps; the few shards left over come back in other epochs). Raises when there are fewer shards than ranks."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world_size {world_size}")
    if len(shards) < world_size:
        raise ValueError(
            f"{len(shards)} shards for {world_size} ranks: write smaller shards (per_shard) or use fewer ranks"
        )
    order = list(shards)
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    share = len(order) // world_size
    return order[rank::world_size][:share]


def shard_dataset(
    shards: Sequence[str | os.PathLike],
    decode: Callable[[dict], Any],
    *,
    rank: int = 0,
    world_size: int = 1,
    seed: int = 0,
    epoch: int = 0,
    shuffle_buffer: int = 1000,
) -> wds.WebDataset:
    """A WebDataset over this rank's shards (rank_shards), split again per DataLoader worker (wds.split_by_worker),
    samples shuffled in a buffer of `shuffle_buffer` (0: in shard order) and turned into training samples by
    `decode(sample)` (a dict: "__key__", the file's extension -> its bytes, "cls" -> the label as bytes). Give every
    worker at least one shard: a rank's shard count should be a multiple of its workers."""
    urls = [str(path) for path in rank_shards(shards, rank=rank, world_size=world_size, seed=seed, epoch=epoch)]
    dataset = wds.WebDataset(
        urls, nodesplitter=None, workersplitter=wds.split_by_worker, shardshuffle=False, empty_check=False
    )
    if shuffle_buffer:
        # a seed per rank, epoch and worker: different buffers everywhere, the same ones when run again
        dataset = dataset.compose(_worker_shuffle(shuffle_buffer, seed * 1_000_003 + epoch * 1_009 + rank))
    return dataset.map(decode)


def _worker_shuffle(buffer: int, seed: int) -> Callable:
    def stage(source: Any) -> Any:
        _, _, worker, _ = wds.utils.pytorch_worker_info()
        return wds.filters.shuffle(buffer, min(buffer, 100), seed=seed * 101 + worker)(source)

    return stage


def sample_label(sample: dict) -> int:
    """The label of a shard sample (stored as the bytes of its decimal text)."""
    value = sample["cls"]
    return int(value.decode() if isinstance(value, bytes) else value)
