"""WebDataset shards of an image folder: the files' own bytes and labels, written once; every rank a disjoint, equal
share of the shards each epoch (reshuffled with a seed all ranks share), every worker its own share of its rank's,
so one epoch over all ranks and workers reads each sample of the shared shards exactly once; samples shuffled
reproducibly, differently per rank."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.shards import rank_shards, sample_label, shard_dataset, shard_paths, write_shards


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[list[tuple[str, int]], list]:
    root = tmp_path_factory.mktemp("shards")
    samples = []
    for i in range(48):
        path = root / f"img{i:02d}.jpg"
        Image.fromarray(np.full((12, 16, 3), i * 5, np.uint8)).save(path)
        samples.append((str(path), i % 3))
    return samples, write_shards(samples, root / "shards", per_shard=4, classes=["a", "b", "c"])


def _key_and_label(sample: dict) -> tuple[str, int]:
    return sample["__key__"], sample_label(sample)


def test_shards_hold_the_files_bytes_and_labels_once(folder):
    samples, shards = folder
    assert len(shards) == 12 and shard_paths(shards[0].parent) == shards
    stamp = shards[0].stat().st_mtime_ns
    assert write_shards(samples, shards[0].parent, per_shard=4) == shards and shards[0].stat().st_mtime_ns == stamp
    read = sorted(shard_dataset(shards, lambda s: (s["__key__"], s["jpg"], sample_label(s)), shuffle_buffer=0))
    assert [key for key, _, _ in read] == [f"{i:08d}" for i in range(48)]
    for (key, data, label), (path, expected) in zip(read, samples):
        assert data == open(path, "rb").read() and label == expected


@pytest.mark.parametrize("world_size", [1, 2, 3, 5])
def test_every_rank_gets_a_disjoint_equal_share_each_epoch(world_size):
    shards = list(range(12))
    for epoch in range(3):
        shares = [rank_shards(shards, rank=r, world_size=world_size, seed=1, epoch=epoch) for r in range(world_size)]
        assert {len(share) for share in shares} == {12 // world_size}
        flat = [s for share in shares for s in share]
        assert len(set(flat)) == len(flat) == 12 // world_size * world_size
    if world_size > 1:
        assert rank_shards(shards, world_size=world_size, seed=1, epoch=0) != rank_shards(
            shards, world_size=world_size, seed=1, epoch=1
        )
    with pytest.raises(ValueError, match="shards for"):
        rank_shards(shards[:1], rank=0, world_size=2)


def test_ranks_and_workers_together_read_each_sample_once(folder):
    _, shards = folder
    seen = []
    for rank in range(2):
        dataset = shard_dataset(shards, _key_and_label, rank=rank, world_size=2, seed=4, shuffle_buffer=8)
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
        seen.append([key for key, _ in loader])
    assert not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == [f"{i:08d}" for i in range(48)]  # 12 shards split 6 and 6: all of them


def test_sample_shuffling_is_reproducible_and_differs_per_rank(folder):
    _, shards = folder

    def keys(rank: int, seed: int) -> list[str]:
        return [
            k for k, _ in shard_dataset(shards, _key_and_label, rank=rank, world_size=2, seed=seed, shuffle_buffer=8)
        ]

    assert keys(0, 4) == keys(0, 4)
    assert keys(0, 4) != sorted(keys(0, 4))  # shuffled, not in shard order
    assert keys(0, 4) != keys(0, 5)


def test_a_shard_set_is_written_again_when_a_source_changes(tmp_path):
    samples = []
    for i in range(6):
        path = tmp_path / f"img{i}.jpg"
        Image.fromarray(np.full((12, 16, 3), i * 20, np.uint8)).save(path)
        samples.append((str(path), i % 2))
    shards = write_shards(samples, tmp_path / "shards", per_shard=4)
    Image.fromarray(np.full((12, 16, 3), 255, np.uint8)).save(samples[5][0])  # same count, new bytes
    shards = write_shards(samples, tmp_path / "shards", per_shard=4)
    read = dict(shard_dataset(shards, lambda s: (s["__key__"], s["jpg"]), shuffle_buffer=0))
    assert read[f"{5:08d}"] == open(samples[5][0], "rb").read()
    data = bytearray(open(samples[4][0], "rb").read())
    data[len(data) // 2] ^= 0xFF  # edited in place: the same size, so only its modification time tells
    open(samples[4][0], "wb").write(bytes(data))
    os.utime(samples[4][0], ns=(os.stat(samples[4][0]).st_atime_ns, os.stat(samples[4][0]).st_mtime_ns + 10**9))
    shards = write_shards(samples, tmp_path / "shards", per_shard=4)
    assert dict(shard_dataset(shards, lambda s: (s["__key__"], s["jpg"]), shuffle_buffer=0))[f"{4:08d}"] == data
    relabelled = [(p, 1 - label) for p, label in samples]
    shards = write_shards(relabelled, tmp_path / "shards", per_shard=4)
    labels = dict(shard_dataset(shards, _key_and_label, shuffle_buffer=0))
    assert [labels[f"{i:08d}"] for i in range(6)] == [label for _, label in relabelled]
