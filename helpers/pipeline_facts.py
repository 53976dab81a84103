"""What a training pipeline already is, read off the objects (the loader's knobs, its dataset, the batch's dtype and
device, the step's precision): the pipeline doctor's advice (doctor_advice.py) starts from these, so that it never
asks you to adopt what you already use, and names the pieces for your task (classifier or SR).

Example:
    >>> data = torch.utils.data.TensorDataset(torch.zeros(8, 3, 32, 32, dtype=torch.uint8), torch.zeros(8).long())
    >>> loader = torch.utils.data.DataLoader(data, batch_size=4)
    >>> batch = describe_batch(next(iter(loader)))  # dtype, device and shape of its inputs and targets
    >>> facts = describe_pipeline(loader, torch.nn.Linear(4, 1), torch.device("cpu"), batch)
    >>> facts.loader, facts.dataset, facts.num_workers, facts.inputs_dtype, facts.task
    ('DataLoader', 'TensorDataset', 0, 'torch.uint8', 'classification')

Copy with: env.py (the usable cores). The course's pieces are recognised by class name, so this file needs none of
them.
Needs: torch; optional: psutil (free memory on a CPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .env import usable_cpu_count

try:
    import psutil
except ImportError:  # optional: without it the free memory of a CPU is unknown
    psutil = None

ON_DEVICE_LOADERS = {"DeviceTensorLoader", "DeviceSRCropLoader"}  # batches made on the device, no DataLoader
DECODED = ON_DEVICE_LOADERS | {"CachedCropLoader", "DecodedSRCache", "TensorDataset"}  # decoded once, in memory
SR_NAMES = {
    "DecodedSRCache",
    "CachedCropLoader",
    "DeviceSRCropLoader",
    "LazyCropSRDataset",
    "NaiveSRDataset",
    "InMemoryNaiveSRDataset",
    "SREvalDataset",
}
CLASSIFIER_NAMES = {
    "DeviceTensorLoader",
    "ImageFolder",
    "DatasetFolder",
    "CIFAR10",
    "CIFAR100",
    "MNIST",
    "ImageNet",
    "FakeData",
    "ReducedCropDataset",
    "StoreCropDataset",
}
FOLDER_CROPS = {"ReducedCropDataset", "StoreCropDataset"}  # a JPEG folder's crops made cheaper already (lesson 07)


@dataclass
class PipelineFacts:
    """What a loader and a step already are: the doctor's advice starts from here."""

    loader: str = ""  # the loader's class name
    dataset: str = ""  # its dataset's class name (a DataLoader's), or its cache's (CachedCropLoader's)
    num_workers: int | None = None  # DataLoader knobs (None: not a DataLoader)
    pin_memory: bool | None = None
    persistent_workers: bool | None = None
    prefetch_factor: int | None = None
    inputs_dtype: str = ""  # the first batch as the loader yields it, before anything moves it
    inputs_device: str = ""
    inputs_ndim: int = 0
    task: str = "unknown"  # "classification", "super-resolution" or "unknown"
    device: str = "cpu"  # where the step runs
    precision: str | None = None  # a TrainStep's (None: unknown, a plain function)
    channels_last: bool | None = None
    augments_on_device: bool = False
    cpu_cores: int = 0
    intra_op_threads: int = 0
    dataset_bytes: int | None = None  # the whole dataset as uint8 inputs, where its length is known
    free_device_bytes: int | None = None

    @property
    def decoded(self) -> bool:
        """True when the data is already decoded once and held in memory (no per-sample decoding)."""
        return bool({self.loader, self.dataset} & DECODED)

    def summary(self) -> str:
        """One line: the loader, its knobs, the batch, the step and the CPU budget."""
        parts = [self.loader + (f" over {self.dataset}" if self.dataset else "")]
        if self.num_workers is not None:
            parts.append(
                f"{self.num_workers} worker{'s' * (self.num_workers != 1)}, pin_memory={self.pin_memory}, persistent_workers="
                f"{self.persistent_workers}, prefetch_factor={self.prefetch_factor}"
            )
        if self.inputs_dtype:
            parts.append(f"inputs {self.inputs_dtype.removeprefix('torch.')} on {self.inputs_device}")
        parts.append(f"task: {self.task}; step on {self.device}" + (f", {self.precision}" if self.precision else ""))
        threads = f"{self.intra_op_threads} intra-op thread{'s' * (self.intra_op_threads != 1)}"
        parts.append(f"{threads}, {self.cpu_cores} cores")
        return "; ".join(parts)


def _first_tensor(batch: Any, index: int) -> torch.Tensor | None:
    if isinstance(batch, torch.Tensor):
        return batch if index == 0 else None
    if isinstance(batch, (tuple, list)) and len(batch) > index and isinstance(batch[index], torch.Tensor):
        return batch[index]
    if isinstance(batch, dict) and len(batch) > index:
        value = list(batch.values())[index]
        return value if isinstance(value, torch.Tensor) else None
    return None


def describe_batch(batch: Any) -> dict[str, Any]:
    """dtype, device and shape of a batch's inputs (its first tensor) and targets (its second), where they exist."""
    facts: dict[str, Any] = {}
    for key, index in (("inputs", 0), ("targets", 1)):
        tensor = _first_tensor(batch, index)
        if tensor is not None:
            facts[key] = (str(tensor.dtype), str(tensor.device), tuple(tensor.shape))
    return facts


def _task(names: set[str], batch: dict[str, Any]) -> str:
    if names & SR_NAMES:
        return "super-resolution"
    if names & CLASSIFIER_NAMES:
        return "classification"
    targets = batch.get("targets")
    if targets is not None and "int" in targets[0] and len(targets[2]) == 1:
        return "classification"  # one integer label per sample
    if targets is not None and len(targets[2]) == 4 and "inputs" in batch and len(batch["inputs"][2]) == 4:
        return "super-resolution"  # image in, image out
    return "unknown"


def _dataset_bytes(loader: Any, dataset: Any, batch: dict[str, Any]) -> int | None:
    """The whole dataset's inputs as uint8 bytes, from its length and one sample's shape (None when unknown)."""
    source = dataset if dataset is not None else loader
    images = getattr(source, "images", None)
    if isinstance(images, torch.Tensor):
        return images.numel()
    try:
        count = len(source)
    except TypeError:
        return None
    shape = batch.get("inputs", (None, None, ()))[2]
    per_sample = 1
    for size in shape[1:]:
        per_sample *= size
    return count * per_sample if len(shape) > 1 else None


def describe_pipeline(
    loader: Any, step: Any, device: torch.device, batch: dict[str, Any] | None = None, *, cpu_cores: int | None = None
) -> PipelineFacts:
    """Read what the pipeline already is off the loader, the step and one batch (see `describe_batch`)."""
    batch = batch or {}
    inner = getattr(loader, "loader", None)  # a wrapper's DataLoader (PrefetchLoader, BackgroundPrefetcher's iterable)
    knobs = loader if isinstance(loader, torch.utils.data.DataLoader) else inner
    dataset = getattr(knobs, "dataset", None) if isinstance(knobs, torch.utils.data.DataLoader) else None
    if dataset is None and hasattr(loader, "cache"):  # CachedCropLoader, DeviceSRCropLoader
        dataset = loader.cache
    facts = PipelineFacts(
        loader=type(loader).__name__,
        dataset=type(dataset).__name__ if dataset is not None else "",
        device=str(device),
        cpu_cores=cpu_cores or usable_cpu_count(),
        intra_op_threads=torch.get_num_threads(),
    )
    if isinstance(knobs, torch.utils.data.DataLoader):
        facts.num_workers, facts.pin_memory = knobs.num_workers, knobs.pin_memory
        facts.persistent_workers = knobs.persistent_workers
        facts.prefetch_factor = knobs.prefetch_factor if knobs.num_workers > 0 else None
    if "inputs" in batch:
        facts.inputs_dtype, facts.inputs_device, shape = batch["inputs"]
        facts.inputs_ndim = len(shape)
    facts.task = _task({facts.loader, facts.dataset}, batch)
    facts.augments_on_device = facts.loader == "DeviceSRCropLoader" or (
        facts.loader == "DeviceTensorLoader" and getattr(loader, "augment", None) is not None
    )
    owner = getattr(step, "__self__", step)
    facts.precision = getattr(owner, "precision", None) if isinstance(getattr(owner, "precision", None), str) else None
    facts.channels_last = getattr(owner, "channels_last", None) if facts.precision else None
    facts.dataset_bytes = _dataset_bytes(loader, dataset, batch)
    facts.free_device_bytes = _free_bytes(device)
    return facts


def _free_bytes(device: torch.device) -> int | None:
    """Memory free for a dataset held on `device`: CUDA's free bytes, or available RAM (with psutil) on a CPU."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return psutil.virtual_memory().available if psutil is not None and device.type == "cpu" else None
