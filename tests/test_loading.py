"""Loading: the whole dataset on the device, every sample once per epoch; the DataLoader sweep; samples per epoch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

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
