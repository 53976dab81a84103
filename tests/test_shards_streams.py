"""Shard streams: the sample shuffle differs per worker and per epoch (not only because the shards differ), a shard
set written with another per_shard is rewritten, and a rank outside the world is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.shards import rank_shards, sample_label, shard_dataset, write_shards

PER_SHARD = 4


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[list[tuple[str, int]], list]:
    root = tmp_path_factory.mktemp("streams")
    samples = []
    for i in range(32):
        path = root / f"img{i:02d}.jpg"
        Image.fromarray(np.full((4, 4, 3), i * 7, np.uint8)).save(path)
        samples.append((str(path), i % 3))
    return samples, write_shards(samples, root / "shards", per_shard=PER_SHARD)


def _key(sample: dict) -> str:
    return sample["__key__"]


def _positions(shuffled: list[str], in_order: list[str]) -> list[int]:
    """Where each shuffled sample stood in the unshuffled stream: the shuffle's own pattern, whatever the shards."""
    return [in_order.index(key) for key in shuffled]


def test_the_sample_shuffle_differs_per_epoch(folder):
    _, shards = folder
    patterns = []
    for epoch in (0, 1):
        in_order = list(shard_dataset(shards, _key, seed=2, epoch=epoch, shuffle_buffer=0))
        shuffled = list(shard_dataset(shards, _key, seed=2, epoch=epoch, shuffle_buffer=8))
        assert sorted(shuffled) == sorted(in_order)
        patterns.append(_positions(shuffled, in_order))
    assert patterns[0] != patterns[1]


def test_the_sample_shuffle_differs_per_worker(folder):
    _, shards = folder
    urls = [str(p) for p in rank_shards(shards, seed=2)]

    def per_worker(buffer: int) -> list[list[str]]:
        dataset = shard_dataset(shards, _key, seed=2, shuffle_buffer=buffer)
        keys = list(torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2))
        worker_of = {str(shards[int(k) // PER_SHARD]): urls.index(str(shards[int(k) // PER_SHARD])) % 2 for k in keys}
        return [[k for k in keys if worker_of[str(shards[int(k) // PER_SHARD])] == w] for w in (0, 1)]

    in_order, shuffled = per_worker(0), per_worker(8)
    patterns = [_positions(shuffled[w], in_order[w]) for w in (0, 1)]
    assert len(patterns[0]) == len(patterns[1]) == 16
    assert patterns[0] != patterns[1]


def test_a_set_written_with_another_per_shard_is_rewritten(folder, tmp_path):
    samples, _ = folder
    assert len(write_shards(samples, tmp_path / "s", per_shard=4)) == 8
    rewritten = write_shards(samples, tmp_path / "s", per_shard=16)
    assert len(rewritten) == 2
    labels = [sample_label(s) for s in shard_dataset(rewritten, lambda s: s, shuffle_buffer=0)]
    assert labels == [label for _, label in samples]


@pytest.mark.parametrize("rank", [-1, 2])
def test_a_rank_outside_the_world_is_refused(folder, rank):
    _, shards = folder
    with pytest.raises(ValueError, match=f"rank {rank} is outside world_size 2"):
        rank_shards(shards, rank=rank, world_size=2)
