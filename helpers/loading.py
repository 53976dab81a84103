"""Loading batches: a DataLoader with per-worker and per-rank seeding and its knobs exposed, a sweep over those knobs,
and a whole dataset held on the device as uint8 (no DataLoader at all).

Copy with: seeding.py (the per-rank seed stride), measure.py (timing for the sweep) with loadmeter.py, memory.py and
pipeline_result.py.
Needs: numpy, psutil, torch; optional: tqdm (sweep_loader_settings's progress bar).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

from .measure import time_batches
from .seeding import rank_seed


def tqdm(*args: Any, **kwargs: Any) -> Any:
    """tqdm's progress bar, imported only when a sweep runs: the rest of this module does not need tqdm."""
    try:
        from tqdm.auto import tqdm as progress_bar
    except ImportError as error:
        message = "sweep_loader_settings shows its progress with tqdm, which is not installed: pip install tqdm"
        raise ImportError(message) from error
    return progress_bar(*args, **kwargs)


def seed_worker(worker_id: int) -> None:
    """worker_init_fn: seed Python's and NumPy's RNGs from the seed PyTorch gave this worker (torch's is already set)."""
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def loader_generator(seed: int, rank: int = 0) -> torch.Generator:
    """A generator for a DataLoader: one seed reproduces every worker's stream, and each rank gets its own."""
    return torch.Generator().manual_seed(rank_seed(seed, rank))


def make_loader(
    dataset: Dataset,
    batch_size: int,
    *,
    seed: int = 0,
    rank: int = 0,
    shuffle: bool = True,
    drop_last: bool = True,
    num_workers: int = 0,
    pin_memory: bool = False,
    prefetch_factor: int | None = None,
    persistent_workers: bool = False,
    sampler: Any = None,
    samples_per_epoch: int | None = None,
) -> DataLoader:
    """A DataLoader with reproducible per-worker, per-rank seeding and the tuning knobs exposed.

    `samples_per_epoch` draws that many samples per epoch (several random crops per image), so a small dataset
    does not restart its workers every few batches.
    """
    extra: dict[str, Any] = {}
    generator = loader_generator(seed, rank)
    if samples_per_epoch is not None and sampler is None:
        sampler = RandomSampler(dataset, num_samples=samples_per_epoch, generator=generator)
    if num_workers > 0:
        extra.update(prefetch_factor=prefetch_factor or 2, persistent_workers=persistent_workers)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle if sampler is None else False,
        sampler=sampler,
        drop_last=drop_last,
        num_workers=num_workers,
        pin_memory=pin_memory,
        worker_init_fn=seed_worker,
        generator=generator,
        **extra,
    )


def loader_settings_grid(
    workers: Sequence[int], *, pin_memory: Sequence[bool] = (False,), prefetch: Sequence[int] = (2,),
    persistent: Sequence[bool] = (True,),
) -> list[dict[str, Any]]:  # fmt: skip
    """Every combination of the DataLoader knobs (prefetch and persistence only where workers > 0)."""
    grid = []
    for n in workers:
        for pin in pin_memory:
            if n == 0:
                grid.append({"num_workers": 0, "pin_memory": pin, "prefetch_factor": None, "persistent_workers": False})
                continue
            for factor in prefetch:
                for keep in persistent:
                    grid.append(
                        {"num_workers": n, "pin_memory": pin, "prefetch_factor": factor, "persistent_workers": keep}
                    )
    return grid


def sweep_loader_settings(
    dataset: Dataset,
    settings: Sequence[dict[str, Any]],
    *,
    batch_size: int,
    batches: int,
    repeats: int = 1,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Measure samples/s of the dataset through a DataLoader for each setting, `repeats` times with the settings
    interleaved (so a burst of load cannot favour one); one row per setting: the median, and every repeat's value.
    Each setting times `batches` batches, or twice what its workers can hold ready if that is more."""
    runs: list[list[float]] = [[] for _ in settings]
    with tqdm(total=repeats * len(settings), desc="loader sweep", leave=False) as bar:
        for _ in range(repeats):
            for index, setting in enumerate(settings):
                # worker start-up (paid once per epoch) and every batch the workers made ahead meanwhile: a full
                # queue would make the first timed batches look instant
                workers = setting.get("num_workers", 0)
                in_flight = workers * (setting.get("prefetch_factor") or 2)
                warmup = 1 + in_flight
                # what the workers make while the queue drains is in the timed window too: time at least twice
                # what can be in flight, so it cannot decide the rate
                timed = max(batches, 2 * in_flight)
                samples = batch_size * (timed + warmup)
                loader = make_loader(dataset, batch_size, seed=seed, samples_per_epoch=samples, **setting)
                runs[index].append(time_batches(loader, timed, warmup=warmup)["samples_per_s"])
                del loader
                bar.update(1)
    return [
        {**setting, "samples_per_s": statistics.median(values), "runs": values}
        for setting, values in zip(settings, runs)
    ]


def dataset_tensors(dataset: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A torchvision in-memory dataset's pixels and labels as (N, C, H, W) uint8 and (N,) int64 tensors, with none of
    its transforms: `.data` as CIFAR10 holds it (NHWC uint8 numpy) or MNIST (NHW uint8 tensor), `.targets` a list
    or tensor. The result goes straight into DeviceTensorLoader (see DeviceTensorLoader.from_dataset)."""
    data, targets = getattr(dataset, "data", None), getattr(dataset, "targets", None)
    if data is None or targets is None:
        name = type(dataset).__name__
        raise TypeError(f"{name} has no .data and .targets (torchvision's CIFAR10, CIFAR100, MNIST and FashionMNIST "
                        "have): stack its images into a uint8 (N, C, H, W) tensor yourself")  # fmt: skip
    images = torch.as_tensor(np.asarray(data))
    if images.dtype != torch.uint8 or images.ndim not in (3, 4):
        raise ValueError(f"{type(dataset).__name__}.data is {images.dtype} {tuple(images.shape)}, not uint8 NHWC/NHW")
    images = images[:, None] if images.ndim == 3 else images.permute(0, 3, 1, 2)
    return images.contiguous(), torch.as_tensor(np.asarray(targets), dtype=torch.int64)


class DeviceTensorLoader:
    """A whole dataset as one uint8 tensor on the device: shuffled index batches and batch augmentation, no DataLoader.

    Every sample appears exactly once per epoch (the last batch may be short unless `drop_last`). `augment` is any
    module taking and returning a batch on the device (e.g. augment.cifar_train_augment()). With
    `world_size` > 1, every rank draws the same permutation (same `seed`) and keeps its own disjoint shard of it,
    cut to equal lengths so all ranks take the same number of steps.
    """

    def __init__(
        self,
        images: torch.Tensor,
        labels: torch.Tensor,
        *,
        batch_size: int,
        device: torch.device | str = "cpu",
        augment: torch.nn.Module | None = None,
        shuffle: bool = True,
        drop_last: bool = False,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if len(images) != len(labels):
            raise ValueError(f"{len(images)} images but {len(labels)} labels")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world_size {world_size}")
        self.rank, self.world_size = rank, world_size
        self.device = torch.device(device)
        self.images = images.to(self.device)
        self.labels = labels.to(self.device)
        self.batch_size, self.augment, self.shuffle, self.drop_last = batch_size, augment, shuffle, drop_last
        self.generator = torch.Generator().manual_seed(seed)
        self.epoch = 0

    @classmethod
    def from_dataset(cls, dataset: Any, **options: Any) -> DeviceTensorLoader:
        """The loader over a torchvision in-memory dataset (CIFAR10, MNIST, ...): its uint8 pixels, not its transforms;
        give the transforms' batch equivalent as `augment` (e.g. augment.cifar_train_augment)."""
        return cls(*dataset_tensors(dataset), **options)

    def __repr__(self) -> str:
        rest = self._shard_size() % self.batch_size
        last = f", the last of {rest}" if rest and not self.drop_last else (f", {rest} dropped" if rest else "")
        order = "shuffled" if self.shuffle else "in order"
        augment = f"augment={type(self.augment).__name__}" if self.augment is not None else "no augmentation"
        return f"DeviceTensorLoader: {len(self)} batches an epoch of {self.batch_size}{last}, {order}, {augment}"

    def _shard_size(self) -> int:
        return len(self.images) // self.world_size

    def __len__(self) -> int:
        full, rest = divmod(self._shard_size(), self.batch_size)
        return full if self.drop_last or rest == 0 else full + 1

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        count = len(self.images)
        order = torch.randperm(count, generator=self.generator) if self.shuffle else torch.arange(count)
        if self.world_size > 1:
            order = order[self.rank :: self.world_size][: self._shard_size()]
        order = order.to(self.device)
        self.epoch += 1
        for start in range(0, len(order), self.batch_size):
            index = order[start : start + self.batch_size]
            if len(index) < self.batch_size and self.drop_last:
                return
            images = self.images.index_select(0, index)
            if self.augment is not None:
                images = self.augment(images)
            yield images, self.labels.index_select(0, index)
