"""Loading on CUDA: the whole dataset on the GPU, sharded per rank exactly as on the CPU; the DataLoader's
pin_memory path and non-blocking copies give the same batches as the plain path."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import TensorDataset

from helpers.augment import cifar_train_augment
from helpers.loading import DeviceTensorLoader, make_loader
from helpers.measure import to_device
from helpers.sr_data import LazyCropSRDataset

pytestmark = pytest.mark.cuda


def _numbered(count: int = 50) -> tuple[torch.Tensor, torch.Tensor]:
    """Images whose every pixel is their index, with their index as the label: a batch shows what it holds."""
    images = torch.arange(count, dtype=torch.uint8).view(count, 1, 1, 1).expand(count, 3, 32, 32).contiguous()
    return images, torch.arange(count)


def test_device_tensor_loader_shards_per_rank_on_cuda_as_on_the_cpu(cuda):
    images, labels = _numbered(50)
    seen = []
    for rank in range(2):
        options = dict(batch_size=8, seed=3, rank=rank, world_size=2)
        on_gpu = list(DeviceTensorLoader(images, labels, device=cuda, **options))
        on_cpu = list(DeviceTensorLoader(images, labels, device="cpu", **options))
        assert len(on_gpu) == len(on_cpu) == 4  # 25 samples per rank: 3 full batches and a short one
        for (x_gpu, y_gpu), (x_cpu, y_cpu) in zip(on_gpu, on_cpu):
            assert x_gpu.device == cuda and y_gpu.device == cuda and x_gpu.dtype == torch.uint8
            assert torch.equal(y_gpu.cpu(), y_cpu) and torch.equal(x_gpu.cpu(), x_cpu)  # the same permutation
            assert torch.equal(x_gpu[:, 0, 0, 0].long(), y_gpu)  # images stay with their labels
        seen.append(torch.cat([y for _, y in on_gpu]).tolist())
    assert not set(seen[0]) & set(seen[1]) and len(seen[0]) == len(seen[1]) == 25  # disjoint, equal shards
    assert sorted(seen[0] + seen[1]) == list(range(50))


def test_device_tensor_loader_with_augmentation_on_cuda(cuda):
    images, labels = _numbered(64)
    loader = DeviceTensorLoader(
        images,
        labels,
        batch_size=16,
        device=cuda,
        augment=cifar_train_augment(),
        drop_last=True,
        seed=0,  # on the CPU
    )
    batches = list(loader)
    assert len(batches) == 4
    for x, y in batches:
        assert x.device == cuda and x.dtype == torch.float32 and x.shape == (16, 3, 32, 32) and y.device == cuda


@pytest.mark.parametrize("workers", [0, 2])
def test_pin_memory_and_non_blocking_copies_give_the_plain_batches(photo_dir, cuda, workers):
    dataset = LazyCropSRDataset(sorted(photo_dir.glob("*.png")), scale=2, hr_crop=32, seed=0)
    options = dict(batch_size=4, seed=1, num_workers=workers, samples_per_epoch=16)
    plain = list(make_loader(dataset, pin_memory=False, **options))
    pinned = list(make_loader(dataset, pin_memory=True, **options))
    assert len(plain) == len(pinned) == 4
    moved = [to_device(batch, cuda) for batch in pinned]  # non_blocking copies from pinned memory
    torch.cuda.synchronize(cuda)
    for (lr, hr), (lr_pin, hr_pin), (lr_gpu, hr_gpu) in zip(plain, pinned, moved):
        assert lr_pin.is_pinned() and hr_pin.is_pinned() and not lr.is_pinned()
        assert lr_gpu.device == cuda and hr_gpu.device == cuda
        assert torch.equal(lr_pin, lr) and torch.equal(hr_pin, hr)
        assert torch.equal(lr_gpu.cpu(), lr) and torch.equal(hr_gpu.cpu(), hr)


def test_non_blocking_copies_of_many_batches_arrive_intact(cuda):
    images, labels = _numbered(256)
    loader = make_loader(TensorDataset(images, labels), 32, seed=0, pin_memory=True, shuffle=False)
    copies = [to_device(batch, cuda) for batch in loader]  # queued back to back, no synchronisation between them
    torch.cuda.synchronize(cuda)
    for (x, y), (x_gpu, y_gpu) in zip(loader, copies):
        assert torch.equal(x_gpu.cpu(), x) and torch.equal(y_gpu.cpu(), y)
