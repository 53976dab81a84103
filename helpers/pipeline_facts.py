"""What a training pipeline already is, read off the objects (the loader's knobs, its dataset, the batch's dtype and
device, the step's precision), and the pipeline doctor's advice from those and from what it measured:
advice never asks you to adopt what you already use, and names the pieces for your task (classifier or SR).

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
}


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
                f"{self.num_workers} workers, pin_memory={self.pin_memory}, persistent_workers="
                f"{self.persistent_workers}, prefetch_factor={self.prefetch_factor}"
            )
        if self.inputs_dtype:
            parts.append(f"inputs {self.inputs_dtype.removeprefix('torch.')} on {self.inputs_device}")
        parts.append(f"task: {self.task}; step on {self.device}" + (f", {self.precision}" if self.precision else ""))
        parts.append(f"{self.intra_op_threads} intra-op threads, {self.cpu_cores} cores")
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
    dataset = getattr(loader, "dataset", None) if isinstance(loader, torch.utils.data.DataLoader) else None
    if dataset is None and hasattr(loader, "cache"):  # CachedCropLoader, DeviceSRCropLoader
        dataset = loader.cache
    facts = PipelineFacts(
        loader=type(loader).__name__,
        dataset=type(dataset).__name__ if dataset is not None else "",
        device=str(device),
        cpu_cores=cpu_cores or usable_cpu_count(),
        intra_op_threads=torch.get_num_threads(),
    )
    if isinstance(loader, torch.utils.data.DataLoader):
        facts.num_workers, facts.pin_memory = loader.num_workers, loader.pin_memory
        facts.persistent_workers = loader.persistent_workers
        facts.prefetch_factor = loader.prefetch_factor if loader.num_workers > 0 else None
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


# --- advice ---


def _decode_once(facts: PipelineFacts) -> list[str]:
    """Keep decoded pixels instead of decoding files per sample, with the pieces for the task (none if in use)."""
    if facts.task == "classification" and facts.loader != "DeviceTensorLoader":
        fits = facts.dataset_bytes is not None and (
            facts.free_device_bytes is None or facts.dataset_bytes < 0.5 * facts.free_device_bytes
        )
        instead = "per-sample indexing and collation" if facts.decoded else "PIL transforms per sample"
        if fits:
            assert facts.dataset_bytes is not None  # fits says so
            size = facts.dataset_bytes / 2**20
            return [
                f"- the whole dataset as one uint8 tensor on the device ({size:.{0 if size >= 10 else 1}f} MiB): "
                "DeviceTensorLoader (loading.py), augmented per sample there with cifar_train_augment() "
                f"(augment.py), instead of {instead};"
            ]
        if not facts.decoded:
            return [
                "- decode fewer pixels: decode JPEGs at reduced size (PIL's draft), or keep a pre-resized uint8 "
                "copy, and augment batches on the device;"
            ]
    if facts.decoded or facts.task == "classification":
        return []
    if facts.task == "super-resolution":
        return [
            "- decode once: DecodedSRCache + CachedCropLoader (sr_cache.py) keep every image as uint8 and cut "
            "paired crops by indexing, instead of decoding files per sample;"
        ]
    return ["- decode once: keep decoded uint8 images in memory instead of decoding files per sample;"]


def _loader_knobs(facts: PipelineFacts) -> list[str]:
    """More workers and their knobs, only where they are not in use yet."""
    if facts.num_workers is None:
        return []
    lines = []
    if facts.num_workers < facts.cpu_cores - 1 and not facts.decoded:  # the CPU budget: the step keeps a core
        lines.append(
            f"- more DataLoader workers ({facts.num_workers} now, {facts.cpu_cores} cores), keeping workers + "
            f"intra-op threads within the cores (torch.set_num_threads);"
        )
    if facts.num_workers > 0 and not facts.persistent_workers:
        lines.append("- persistent_workers=True, so workers are not restarted every epoch;")
    if facts.device.startswith("cuda") and not facts.pin_memory and facts.inputs_device == "cpu":
        lines.append("- pin_memory=True, so host-to-device copies are asynchronous (non_blocking=True);")
    return lines


def _on_the_device(facts: PipelineFacts) -> list[str]:
    """uint8 to the device and augmentation there, where the batch does not arrive that way yet."""
    lines = []
    if facts.inputs_device == "cpu" and facts.inputs_dtype and facts.inputs_dtype != "torch.uint8":
        where = "on the device" if facts.device.startswith("cuda") else "in the step"
        lines.append(f"- send uint8 batches (a quarter of the bytes of float32) and make them float {where};")
    if facts.device.startswith("cuda") and not facts.augments_on_device:
        if facts.task == "super-resolution":
            lines.append("- DeviceSRCropLoader (sr_cache.py): paired crops, flips and LR made on the GPU;")
        elif facts.task == "classification" and facts.loader != "DeviceTensorLoader" and not _decode_once(facts):
            lines.append(
                "- batch augmentation on the device (cifar_train_augment() in augment.py, kornia) instead "
                "of per-sample transforms;"
            )
    if facts.loader in ON_DEVICE_LOADERS:
        lines.append(
            "- the loader already makes its batches on the device: what remains is its own work per batch; "
            "time it alone (measure.time_batches), lighten its augmentation, or take larger batches;"
        )
    return lines


def _step_speedups(facts: PipelineFacts) -> list[str]:
    lines = ["- the input pipeline keeps up: more loader work will not help; speed up the step:"]
    if facts.precision == "fp32":
        lines.append(
            "- mixed precision: TrainStep(precision='bf16', or 'fp16' with its GradScaler) where the device "
            "runs it natively (step.py's fastest_precision measures which);"
        )
    elif facts.precision is None:
        lines.append(
            "- mixed precision with torch.autocast (bf16, or fp16 with a GradScaler), if your step does not use it yet;"
        )
    if facts.channels_last is False and facts.inputs_ndim == 4:
        lines.append("- channels_last (TrainStep(channels_last=True)) for convolutions;")
    lines.append("- a larger batch, and torch.compile on the model;")
    return lines


def _cpu_budget(facts: PipelineFacts) -> list[str]:
    if not facts.num_workers or facts.device.startswith("cuda"):
        return []
    over = facts.num_workers + facts.intra_op_threads > facts.cpu_cores
    return [
        f"- fewer DataLoader workers or intra-op threads: {facts.num_workers} workers + {facts.intra_op_threads} "
        f"threads {'exceed' if over else 'share'} {facts.cpu_cores} cores with the step "
        f"(torch.set_num_threads({max(1, facts.cpu_cores - facts.num_workers)}) for the training process);"
    ]


def advice_for(verdict: str, facts: PipelineFacts, *, other_cores: float | None = None) -> list[str]:
    """What to try for a verdict, in order, from what the pipeline already is (nothing it already uses)."""
    if verdict == "INPUT-BOUND":
        lines = _decode_once(facts) + _loader_knobs(facts) + _on_the_device(facts)
    elif verdict == "LOADER COMPETES WITH THE STEP":
        lines = _cpu_budget(facts) + _decode_once(facts) + _on_the_device(facts)
        if facts.device.startswith("cuda"):
            lines.append(
                "- the host work between steps delays the next launch: move per-sample work into workers or "
                "onto the device;"
            )
    elif verdict == "COMPUTE-BOUND":
        lines = _step_speedups(facts) + (_cpu_budget(facts) if facts.num_workers else [])
    else:
        lines = [
            "- rerun on a quieter machine, or with a larger budget_s (more steps per block), before changing the "
            "pipeline;"
        ]
    if other_cores is not None and other_cores >= 0.5:
        lines.append(
            f"- other processes used {other_cores:.1f} of {facts.cpu_cores} cores meanwhile: rerun with them "
            "stopped to confirm."
        )
    return lines
