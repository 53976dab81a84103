"""Loading batches: a DataLoader with per-worker and per-rank seeding and its knobs exposed, a sweep over those knobs,
and a whole dataset held on the device as uint8 (no DataLoader at all).

Example:
    >>> data = torch.utils.data.TensorDataset(torch.zeros(10, 3), torch.arange(10))
    >>> loader = make_loader(data, batch_size=4, seed=0)  # the same seed, the same batches on every worker count
    >>> str(loader).split(", ")[0]  # print(loader): what it yields, its knobs and seed
    'DataLoader (make_loader): 2 batches an epoch of 4'
    >>> [labels.tolist() for _, labels in loader] == [labels.tolist() for _, labels in make_loader(data, 4, seed=0)]
    True

Copy with: seeding.py (the per-rank seed stride), measure.py (timing for the sweep) with loadmeter.py, memory.py,
pipeline_result.py and spread.py.
Needs: numpy, psutil, torch.
"""

from __future__ import annotations

import random
import statistics
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler

from .measure import PipelineProbe, time_batches
from .seeding import rank_seed


def seed_worker(worker_id: int) -> None:
    """worker_init_fn: seed Python's and NumPy's RNGs from the seed PyTorch gave this worker (torch's is already set)."""
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def loader_generator(seed: int, rank: int = 0) -> torch.Generator:
    """A generator for a DataLoader: one seed reproduces every worker's stream, and each rank gets its own."""
    return torch.Generator().manual_seed(rank_seed(seed, rank))


class SeededDataLoader(DataLoader):
    """make_loader's DataLoader: torch's own, plus a repr that states what it yields (batches an epoch, the last
    one's size or what drop_last drops, the order, workers, the seed)."""

    seed, rank = 0, 0

    def __repr__(self) -> str:
        workers = f"{self.num_workers} worker{'s' * (self.num_workers != 1)}"
        try:
            samples = len(self.sampler)  # type: ignore[arg-type]
        except TypeError:  # an iterable-style dataset: no length to count batches by
            return f"DataLoader (make_loader): batches of {self.batch_size} from an iterable dataset, {workers}"
        rest = samples % (self.batch_size or 1)
        if not rest:
            last = ""
        elif self.drop_last:
            last = (
                f", the last {rest} sample{'s' * (rest != 1)} dropped (drop_last=True; DataLoader's default keeps them)"
            )
        else:
            last = f", the last of {rest}"
        kinds = {RandomSampler: "shuffled", SequentialSampler: "in order"}
        order = kinds.get(type(self.sampler), f"drawn by {type(self.sampler).__name__}")
        return (
            f"DataLoader (make_loader): {len(self)} batches an epoch of {self.batch_size}{last}, {order}, {workers}, "
            f"seed {self.seed}" + (f", rank {self.rank}" if self.rank else "")
        )


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
) -> SeededDataLoader:
    """A DataLoader with reproducible per-worker, per-rank seeding and the tuning knobs exposed; `print()` it to see
    what it yields.

    Unlike DataLoader's default, `drop_last=True`: an epoch's last short batch is dropped, so every batch holds
    `batch_size` samples (what a compiled or BatchNorm model trains on best); pass `drop_last=False` to keep it, as a
    plain DataLoader does. `samples_per_epoch` draws that many samples per epoch (several random crops per image),
    so a small dataset does not restart its workers every few batches.
    """
    extra: dict[str, Any] = {}
    generator = loader_generator(seed, rank)
    if samples_per_epoch is not None and sampler is None:
        # torch's Dataset declares no __len__ (an iterable-style one has none); RandomSampler is for a map-style one
        sampler = RandomSampler(dataset, num_samples=samples_per_epoch, generator=generator)  # type: ignore[arg-type]
    if num_workers > 0:
        extra.update(prefetch_factor=prefetch_factor or 2, persistent_workers=persistent_workers)
    loader = SeededDataLoader(
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
    loader.seed, loader.rank = seed, rank
    return loader


def loader_settings_grid(
    workers: Sequence[int],
    *,
    threads: Sequence[int | None] = (None,),
    pin_memory: Sequence[bool] = (False,),
    prefetch: Sequence[int] = (2,),
    persistent: Sequence[bool] = (True,),
) -> list[dict[str, Any]]:
    """Every combination of the DataLoader knobs and the training process's intra-op threads (`threads`; None leaves
    torch's setting as it is), prefetch and persistence only where workers > 0."""
    grid = []
    for n in workers:
        for count in threads:
            for pin in pin_memory:
                if n == 0:
                    grid.append(
                        {
                            "num_workers": 0,
                            "intra_op_threads": count,
                            "pin_memory": pin,
                            "prefetch_factor": None,
                            "persistent_workers": False,
                        }
                    )
                    continue
                grid += [
                    {
                        "num_workers": n,
                        "intra_op_threads": count,
                        "pin_memory": pin,
                        "prefetch_factor": factor,
                        "persistent_workers": keep,
                    }
                    for factor in prefetch
                    for keep in persistent
                ]
    return grid


def _sweep_turn(
    dataset: Dataset,
    setting: dict[str, Any],
    *,
    batch_size: int,
    batches: int,
    seed: int,
    step: Callable[[Any], Any] | None,
    device: torch.device,
) -> dict[str, float]:
    """One setting's turn: a fresh loader (only its workers alive), its intra-op threads set for the timed process,
    then its batches timed alone or feeding `step`; the thread count is restored and the workers end afterwards."""
    knobs = {key: value for key, value in setting.items() if key != "intra_op_threads"}
    threads_before = torch.get_num_threads()
    if setting.get("intra_op_threads"):
        torch.set_num_threads(setting["intra_op_threads"])
    try:
        # batches the workers made ahead (worker start-up is paid meanwhile) are drained untimed: a full queue would
        # make the first timed batches look instant; what they make while it drains is timed, so time at least
        # twice what can be in flight, and that cannot decide the rate
        in_flight = knobs.get("num_workers", 0) * (knobs.get("prefetch_factor") or 2)
        timed = max(batches, 2 * in_flight)
        loader = make_loader(
            dataset, batch_size, seed=seed, samples_per_epoch=batch_size * (timed + in_flight + 4), **knobs
        )
        if step is None:
            return {"samples_per_s": time_batches(loader, timed, warmup=1)["samples_per_s"]}  # + what is in flight
        probe = PipelineProbe(loader, step, device, premade=1, warmup=1)
        for _ in range(in_flight):
            next(probe.source)
        rate = probe.fed_block(timed)
        probe.premade_block(1)  # result() summarises fed / pre-made pairs: one pre-made step completes the pair
        result = probe.result()
        return {"samples_per_s": rate, "data_wait_ms": result.data_wait_ms, "compute_ms": result.compute_ms}
    finally:
        torch.set_num_threads(threads_before)


def sweep_loader_settings(
    dataset: Dataset,
    settings: Sequence[dict[str, Any]],
    *,
    batch_size: int,
    batches: int,
    repeats: int = 1,
    seed: int = 0,
    step: Callable[[Any], Any] | None = None,
    device: torch.device | str = "cpu",
    progress: Callable[[list[Any]], Iterable[Any]] = list,
) -> list[dict[str, Any]]:
    """Measure each setting of `loader_settings_grid` (DataLoader knobs and intra-op threads) `repeats` times, the
    settings interleaved and their order rotated each repeat, so a burst of load cannot favour one. With `step`, end
    to end: the loader feeds the step on `device` (samples/s fed, and each step's data-wait and compute, in which
    oversubscribed cores show); without, the loader alone. Each turn times `batches` batches, or twice what its
    workers can hold ready if that is more. One row per setting: the median, every repeat's value (`runs`) and, end
    to end, median data-wait and compute. `progress` wraps the list of turns (e.g. tqdm)."""
    if not settings:
        raise ValueError("no settings to sweep: give at least one (loader_settings_grid makes them)")
    order = list(range(len(settings)))
    turns = [i for r in range(repeats) for i in order[r % len(order) :] + order[: r % len(order)]]
    runs: list[list[dict[str, float]]] = [[] for _ in settings]
    for index in progress(turns):
        with warnings.catch_warnings():  # more workers than cores on purpose: torch's warning says only that
            warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)
            runs[index].append(
                _sweep_turn(
                    dataset,
                    settings[index],
                    batch_size=batch_size,
                    batches=batches,
                    seed=seed,
                    step=step,
                    device=torch.device(device),
                )
            )
    rows = []
    for setting, measured in zip(settings, runs):
        row = {
            **setting,
            "mode": "loader alone" if step is None else "end to end",
            "samples_per_s": statistics.median(m["samples_per_s"] for m in measured),
            "runs": [m["samples_per_s"] for m in measured],
        }
        if step is not None:
            row["data_wait_ms"] = statistics.median(m["data_wait_ms"] for m in measured)
            row["compute_ms"] = statistics.median(m["compute_ms"] for m in measured)
            row["compute_runs"] = [m["compute_ms"] for m in measured]
        rows.append(row)
    return rows


def dataset_tensors(dataset: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A torchvision in-memory dataset's pixels and labels as (N, C, H, W) uint8 and (N,) int64 tensors, with none of
    its transforms: `.data` as CIFAR10 holds it (NHWC uint8 numpy) or MNIST (NHW uint8 tensor), `.targets` a list
    or tensor. The result goes straight into DeviceTensorLoader (see DeviceTensorLoader.from_dataset)."""
    data, targets = getattr(dataset, "data", None), getattr(dataset, "targets", None)
    if data is None or targets is None:
        name = type(dataset).__name__
        raise TypeError(
            f"{name} has no .data and .targets (torchvision's CIFAR10, CIFAR100, MNIST and FashionMNIST "
            "have): stack its images into a uint8 (N, C, H, W) tensor yourself"
        )
    images = torch.as_tensor(np.asarray(data))
    if images.dtype != torch.uint8 or images.ndim not in (3, 4):
        raise ValueError(f"{type(dataset).__name__}.data is {images.dtype} {tuple(images.shape)}, not uint8 NHWC/NHW")
    images = images[:, None] if images.ndim == 3 else images.permute(0, 3, 1, 2)
    return images.contiguous(), torch.as_tensor(np.asarray(targets), dtype=torch.int64)


class DeviceTensorLoader:
    """A whole dataset as one uint8 tensor on the device: shuffled index batches and batch augmentation, no DataLoader.

    Every sample appears exactly once per epoch (the last batch may be short unless `drop_last`). `augment` is any
    module taking and returning a batch on the device (e.g. augment.cifar_train_augment(), built on the CPU: the
    loader moves it, buffers and parameters, to `device`). With
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
        # a module built on the CPU (its normalisation constants are buffers) would meet device batches: move it
        augment = augment.to(self.device) if isinstance(augment, torch.nn.Module) else augment
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
        # one index copy per epoch, pinned and asynchronous on CUDA: a pageable copy would wait for the queued steps
        on_cuda = self.device.type == "cuda"
        order = order.pin_memory().to(self.device, non_blocking=True) if on_cuda else order.to(self.device)
        self.epoch += 1
        for start in range(0, len(order), self.batch_size):
            index = order[start : start + self.batch_size]
            if len(index) < self.batch_size and self.drop_last:
                return
            images = self.images.index_select(0, index)
            if self.augment is not None:
                images = self.augment(images)
            yield images, self.labels.index_select(0, index)
