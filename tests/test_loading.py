"""Loading: the whole dataset on the device, every sample once per epoch; the DataLoader sweep; samples per epoch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import Dataset

from helpers.loading import DeviceTensorLoader, loader_settings_grid, make_loader, sweep_loader_settings
from helpers.sr_data import LazyCropSRDataset


def _photos(tmp_path, count=3):
    rng = np.random.default_rng(0)
    for i in range(count):
        Image.fromarray(rng.integers(0, 256, (130, 150, 3), dtype=np.uint8)).save(tmp_path / f"p{i}.png")
    return sorted(tmp_path.glob("*.png"))


def test_device_tensor_loader_gives_every_sample_once_per_epoch():
    images = torch.arange(103, dtype=torch.uint8).reshape(103, 1, 1, 1).expand(103, 3, 4, 4).contiguous()
    labels = torch.arange(103)
    loader = DeviceTensorLoader(images, labels, batch_size=10, seed=0)
    assert len(loader) == 11
    for _ in range(2):
        seen = torch.cat([y for _, y in loader])
        assert sorted(seen.tolist()) == list(range(103))
        for x, y in loader:
            assert torch.equal(x[:, 0, 0, 0].long(), y)  # images stay with their labels
    orders = [torch.cat([y for _, y in loader]) for _ in range(2)]
    assert not torch.equal(orders[0], orders[1])  # reshuffled every epoch
    again = DeviceTensorLoader(images, labels, batch_size=10, seed=0)
    assert torch.equal(
        torch.cat([y for _, y in again]),
        torch.cat([y for _, y in DeviceTensorLoader(images, labels, batch_size=10, seed=0)]),
    )
    assert len(DeviceTensorLoader(images, labels, batch_size=10, drop_last=True)) == 10


def test_sweep_returns_one_row_per_setting(tmp_path):
    dataset = LazyCropSRDataset(_photos(tmp_path), scale=2, hr_crop=32)
    grid = loader_settings_grid(workers=(0, 1), pin_memory=(False,), prefetch=(2,), persistent=(True, False))
    assert len(grid) == 3
    rows = sweep_loader_settings(dataset, grid, batch_size=2, batches=2)
    assert [r["num_workers"] for r in rows] == [0, 1, 1] and all(r["samples_per_s"] > 0 for r in rows)
    assert all(r["mode"] == "loader alone" and "compute_ms" not in r for r in rows)


def test_the_grid_crosses_workers_with_intra_op_threads():
    grid = loader_settings_grid(workers=(0, 2), threads=(1, 2), prefetch=(2, 4))
    assert [(s["num_workers"], s["intra_op_threads"], s["prefetch_factor"]) for s in grid] == [
        (0, 1, None),
        (0, 2, None),
        (2, 1, 2),
        (2, 1, 4),
        (2, 2, 2),
        (2, 2, 4),
    ]


def test_the_sweep_feeds_the_step_with_each_thread_count_and_restores_it(tmp_path):
    dataset = LazyCropSRDataset(_photos(tmp_path), scale=2, hr_crop=32)
    seen, before = [], torch.get_num_threads()

    def step(batch):  # records the intra-op threads each step ran with
        lr, hr = batch
        seen.append(torch.get_num_threads())
        assert lr.shape == (2, 3, 16, 16) and hr.shape == (2, 3, 32, 32)

    grid = loader_settings_grid(workers=(0, 1), threads=(1, 2))
    turns = []
    rows = sweep_loader_settings(
        dataset,
        grid,
        batch_size=2,
        batches=2,
        repeats=2,
        step=step,
        progress=lambda order: turns.extend(order) or order,
    )
    assert torch.get_num_threads() == before and set(seen) == {1, 2}
    assert all(r["mode"] == "end to end" and len(r["runs"]) == 2 and r["compute_ms"] >= 0 for r in rows)
    assert turns == [0, 1, 2, 3, 1, 2, 3, 0]  # interleaved, the order rotated each repeat
    # each turn's steps ran with its own setting's threads: a warm-up fed and pre-made step, 2 timed, 1 pre-made
    assert seen[:5] == [1] * 5 and seen[5:10] == [2] * 5


def test_samples_per_epoch_draws_more_than_the_dataset(tmp_path):
    dataset = LazyCropSRDataset(_photos(tmp_path), scale=2, hr_crop=32, seed=0)
    loader = make_loader(dataset, batch_size=4, samples_per_epoch=20)
    assert len(loader) == 5


def test_dataset_tensors_take_torchvisions_in_memory_layouts():
    from types import SimpleNamespace

    from helpers.loading import DeviceTensorLoader, dataset_tensors

    cifar_like = SimpleNamespace(data=np.arange(2 * 4 * 5 * 3, dtype=np.uint8).reshape(2, 4, 5, 3), targets=[3, 7])
    images, labels = dataset_tensors(cifar_like)
    assert images.shape == (2, 3, 4, 5) and images.dtype == torch.uint8 and labels.dtype == torch.int64
    assert torch.equal(images[1, :, 2, 3], torch.from_numpy(cifar_like.data[1, 2, 3]))  # NHWC -> NCHW, not a reshape
    mnist_like = SimpleNamespace(data=torch.zeros(5, 28, 28, dtype=torch.uint8), targets=torch.arange(5))
    assert dataset_tensors(mnist_like)[0].shape == (5, 1, 28, 28)
    loader = DeviceTensorLoader.from_dataset(mnist_like, batch_size=2)
    assert len(loader) == 3 and "the last of 1" in repr(loader) and "no augmentation" in repr(loader)
    with pytest.raises(TypeError, match="no .data and .targets"):
        dataset_tensors([1, 2, 3])
    with pytest.raises(ValueError, match="uint8"):
        dataset_tensors(SimpleNamespace(data=np.zeros((2, 4, 4, 3), dtype=np.float32), targets=[0, 1]))


class _Indices(Dataset):
    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> int:
        return index


def _order(loader) -> list[int]:
    return torch.cat(list(loader)).tolist()


class TestSeedsShufflingAndShares:
    """make_loader's seed decides the order of a samples_per_epoch draw, drop_last and shuffle reach the DataLoader, and
    DeviceTensorLoader gives every rank a disjoint share of one permutation, all shares the same length."""

    def test_a_samples_per_epoch_draw_is_decided_by_the_seed_alone(self):
        first = _order(make_loader(_Indices(50), 5, seed=3, samples_per_epoch=40))
        torch.manual_seed(12345)  # the global RNG moved on: the loader's own generator decides
        assert _order(make_loader(_Indices(50), 5, seed=3, samples_per_epoch=40)) == first
        assert _order(make_loader(_Indices(50), 5, seed=4, samples_per_epoch=40)) != first
        assert _order(make_loader(_Indices(50), 5, seed=3, rank=1, samples_per_epoch=40)) != first

    def test_drop_last_and_shuffle_reach_the_dataloader(self):
        kept = make_loader(_Indices(10), 4, shuffle=False, drop_last=False)
        assert [len(batch) for batch in kept] == [4, 4, 2]
        assert _order(kept) == list(range(10))
        assert [len(batch) for batch in make_loader(_Indices(10), 4, shuffle=False)] == [4, 4]  # drop_last by default
        assert sorted(_order(make_loader(_Indices(10), 5, seed=0))) == list(range(10))
        assert _order(make_loader(_Indices(10), 5, seed=0)) != list(range(10))  # shuffled by default

    def test_ranks_get_disjoint_equal_shares_of_one_permutation(self):
        count, world = 10, 3
        images = torch.arange(count, dtype=torch.uint8).view(count, 1, 1, 1)
        labels = torch.arange(count)
        shares = []
        for rank in range(world):
            loader = DeviceTensorLoader(images, labels, batch_size=2, seed=5, rank=rank, world_size=world)
            share = torch.cat([y for _, y in loader]).tolist()
            assert len(share) == count // world and len(loader) == 2
            shares.append(share)
        seen = [index for share in shares for index in share]
        assert len(set(seen)) == len(seen)  # no sample on two ranks

    def test_a_dataset_that_fills_its_batches_has_no_empty_last_batch(self):
        images, labels = torch.zeros(10, 1, 1, 1, dtype=torch.uint8), torch.arange(10)
        for drop_last in (False, True):
            loader = DeviceTensorLoader(images, labels, batch_size=5, drop_last=drop_last)
            assert len(loader) == 2 == len(list(loader))

    def test_the_sweep_drains_what_workers_hold_ready_and_times_at_least_twice_that(self, monkeypatch):
        from helpers import loading

        calls = []

        def fake_time_batches(loader, batches, *, warmup=1, device=None):
            calls.append((batches, warmup, loader.num_workers))
            return {"samples_per_s": 1.0}

        monkeypatch.setattr(loading, "time_batches", fake_time_batches)
        settings = loading.loader_settings_grid([0, 2], prefetch=[3])
        rows = loading.sweep_loader_settings(_Indices(8), settings, batch_size=2, batches=4)
        assert [row["samples_per_s"] for row in rows] == [1.0, 1.0]
        # 2 workers x 3 ahead: 6 in flight, timed twice over; time_batches itself draws them first (batches_ahead)
        assert sorted(calls, key=lambda c: c[2]) == [(4, 1, 0), (12, 1, 2)]
