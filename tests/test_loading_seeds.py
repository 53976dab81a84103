"""make_loader's seed decides the order of a samples_per_epoch draw, drop_last and shuffle reach the DataLoader, and
DeviceTensorLoader gives every rank a disjoint share of one permutation, all shares the same length."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

from helpers.loading import DeviceTensorLoader, make_loader


class _Indices(Dataset):
    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> int:
        return index


def _order(loader) -> list[int]:
    return torch.cat(list(loader)).tolist()


def test_a_samples_per_epoch_draw_is_decided_by_the_seed_alone():
    first = _order(make_loader(_Indices(50), 5, seed=3, samples_per_epoch=40))
    torch.manual_seed(12345)  # the global RNG moved on: the loader's own generator decides
    assert _order(make_loader(_Indices(50), 5, seed=3, samples_per_epoch=40)) == first
    assert _order(make_loader(_Indices(50), 5, seed=4, samples_per_epoch=40)) != first
    assert _order(make_loader(_Indices(50), 5, seed=3, rank=1, samples_per_epoch=40)) != first


def test_drop_last_and_shuffle_reach_the_dataloader():
    kept = make_loader(_Indices(10), 4, shuffle=False, drop_last=False)
    assert [len(batch) for batch in kept] == [4, 4, 2]
    assert _order(kept) == list(range(10))
    assert [len(batch) for batch in make_loader(_Indices(10), 4, shuffle=False)] == [4, 4]  # drop_last by default
    assert sorted(_order(make_loader(_Indices(10), 5, seed=0))) == list(range(10))
    assert _order(make_loader(_Indices(10), 5, seed=0)) != list(range(10))  # shuffled by default


def test_ranks_get_disjoint_equal_shares_of_one_permutation():
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


def test_a_dataset_that_fills_its_batches_has_no_empty_last_batch():
    images, labels = torch.zeros(10, 1, 1, 1, dtype=torch.uint8), torch.arange(10)
    for drop_last in (False, True):
        loader = DeviceTensorLoader(images, labels, batch_size=5, drop_last=drop_last)
        assert len(loader) == 2 == len(list(loader))


def test_the_sweep_drains_what_workers_hold_ready_and_times_at_least_twice_that(monkeypatch):
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
