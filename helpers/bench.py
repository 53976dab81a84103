"""Measuring input pipelines: loader throughput, data-wait against compute, pipeline efficiency, memory, a doctor,
and the `python -m helpers.bench sr` ladder."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .loading import count_samples, time_batches


# --- memory ------------------------------------------------------------------------------------------------------


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set size (Linux: /proc/self/clear_refs); False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int | None:
    """This process's peak resident set size since start or the last reset, in bytes (None where unknown)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    except (ImportError, OSError):
        return None


def reset_peak_device_memory(device: torch.device) -> None:
    """Reset CUDA's peak-allocation counter (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_device_memory_bytes(device: torch.device) -> int | None:
    """Peak bytes allocated on a CUDA device since the last reset (None on CPU)."""
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so host timers measure it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def sr_memory_by_scale(paths: list[Path], scales: tuple[int, ...] = (2, 3, 4)) -> list[dict[str, Any]]:
    """Bytes held by the traditional in-memory stores (float32 upscaled LR + HR) and by the uint8 cache, per scale."""
    from .datasets import PIXEL_BYTES, DecodedSRCache, InMemoryNaiveSRDataset

    rows = []
    for scale in scales:
        traditional = InMemoryNaiveSRDataset(paths, scale=scale, hr_crop=scale)
        cache = DecodedSRCache(paths, scale=scale)
        input_bytes = sum(t.numel() * t.element_size() for t in traditional.inputs)
        rows.append(
            {
                "scale": scale,
                "images": len(paths),
                "traditional_mib": traditional.nbytes / 2**20,
                "cache_mib": cache.nbytes / 2**20,
                "total_ratio": traditional.nbytes / cache.nbytes,
                # model inputs: float32 RGB at HR size against the LR's uint8 RGB bytes (padding not counted)
                "input_ratio": input_bytes / (cache.lr_total * 3 // PIXEL_BYTES),
            }
        )
        del traditional, cache
    return rows


# --- loader alone ------------------------------------------------------------------------------------------------


def measure_loader(loader: Iterable, batches: int, warmup: int = 1) -> dict[str, Any]:
    """Samples/s of a loader on its own (no model), with this process's peak RSS during the run."""
    reset_peak_rss()
    result = time_batches(loader, batches, warmup)
    result["peak_rss_mib"] = (peak_rss_bytes() or 0) / 2**20
    return result


# --- loader feeding a model --------------------------------------------------------------------------------------


def to_device(batch: Any, device: torch.device) -> Any:
    """Move a tensor, or a list/tuple of tensors, to `device` (non-blocking from pinned memory)."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    return type(batch)(to_device(item, device) for item in batch)


def plain_train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
) -> Callable[[Any], float]:
    """A plain fp32 step for benchmarking loaders: takes an (inputs, targets) batch on the device; uint8 tensors are
    made float in [0, 1] here, on the device, as a fast pipeline sends them."""

    def step(batch: Any) -> float:
        inputs, targets = (t.float().div_(255) if t.dtype == torch.uint8 else t for t in batch)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    return step


def sr_train_step(model: nn.Module, lr: float = 1e-4) -> Callable[[Any], float]:
    """The SR benchmark step: L1 loss, Adam."""
    return plain_train_step(model, torch.optim.Adam(model.parameters(), lr=lr), nn.L1Loss())


class _Restarting:
    """An endless iterator over a loader: starts a new epoch when one ends."""

    def __init__(self, loader: Iterable) -> None:
        self.loader, self.iterator = loader, iter(loader)

    def __next__(self) -> Any:
        try:
            return next(self.iterator)
        except StopIteration:
            self.iterator = iter(self.loader)
            return next(self.iterator)


@dataclass
class PipelineResult:
    """A loader feeding a model, against the same model on pre-made device batches, measured interleaved."""

    samples_per_s: float
    ideal_samples_per_s: float
    pipeline_efficiency: float
    data_wait_ms: float
    compute_ms: float
    steps: int
    peak_rss_mib: float
    peak_device_mib: float | None

    @property
    def data_wait_fraction(self) -> float:
        """Share of a fed step spent waiting for data."""
        return self.data_wait_ms / max(self.data_wait_ms + self.compute_ms, 1e-12)


def measure_pipeline(
    loader: Iterable,
    step: Callable[[Any], Any],
    device: torch.device,
    steps_per_block: int,
    blocks: int = 3,
    warmup: int = 2,
    premade: int = 4,
) -> PipelineResult:
    """Pipeline efficiency = fed samples/s over the same step's samples/s on pre-made device batches.

    Fed and pre-made blocks alternate (`blocks` of each). Efficiency is the median over block pairs of
    (pre-made block time / fed block time): pairing cancels drift on the machine, and the median keeps a stray
    interruption from deciding the result. A fed step's data-wait is the time to get the next batch onto the
    device; its compute is the step itself (medians per step).
    """
    device = torch.device(device)
    source = _Restarting(loader)
    batches = [to_device(next(source), device) for _ in range(premade)]
    for i in range(warmup):
        step(to_device(next(source), device))
        step(batches[i % premade])
    synchronize(device)
    reset_peak_rss()
    reset_peak_device_memory(device)
    waits, computes, ratios = [], [], []
    fed_total = ideal_total = 0.0
    fed_samples = ideal_samples = 0
    for _ in range(blocks):
        block_start = time.perf_counter()
        for _ in range(steps_per_block):
            t0 = time.perf_counter()
            batch = to_device(next(source), device)
            synchronize(device)
            t1 = time.perf_counter()
            step(batch)
            synchronize(device)
            waits.append(t1 - t0)
            computes.append(time.perf_counter() - t1)
            fed_samples += count_samples(batch)
        fed_block = time.perf_counter() - block_start
        block_start = time.perf_counter()
        for i in range(steps_per_block):
            step(batches[i % premade])
            ideal_samples += count_samples(batches[i % premade])
        synchronize(device)
        ideal_block = time.perf_counter() - block_start
        ratios.append(ideal_block / fed_block)
        fed_total += fed_block
        ideal_total += ideal_block
    peak_device = peak_device_memory_bytes(device)
    return PipelineResult(
        samples_per_s=fed_samples / fed_total,
        ideal_samples_per_s=ideal_samples / ideal_total,
        pipeline_efficiency=statistics.median(ratios),
        data_wait_ms=1000 * statistics.median(waits),
        compute_ms=1000 * statistics.median(computes),
        steps=len(waits),
        peak_rss_mib=(peak_rss_bytes() or 0) / 2**20,
        peak_device_mib=peak_device / 2**20 if peak_device is not None else None,
    )


def diagnose_pipeline(result: PipelineResult, num_workers: int | None = None, cpu_cores: int | None = None) -> str:
    """The pipeline doctor: input-bound or compute-bound, and what to try next (first line: the verdict)."""
    wait = result.data_wait_fraction
    numbers = (
        f"efficiency {result.pipeline_efficiency:.2f}; {100 * wait:.0f}% of each step waits for data "
        f"({result.data_wait_ms:.1f} ms wait, {result.compute_ms:.1f} ms compute)"
    )
    if wait > 0.10 or result.pipeline_efficiency < 0.90:
        advice = [f"INPUT-BOUND: {numbers}.", "The model waits for data; try, in order:"]
        if num_workers is not None and cpu_cores and num_workers < cpu_cores:
            advice.append(f"- more DataLoader workers ({num_workers} now, {cpu_cores} cores), persistent_workers=True;")
        advice += [
            "- decode once: a uint8 cache of decoded images (helpers.datasets.DecodedSRCache), not files per sample;",
            "- crop before converting to float, and send uint8 to the device (4x fewer bytes), normalise there;",
            "- batch augmentation on the device (kornia) instead of per-sample PIL transforms;",
            "- pin_memory=True with non_blocking copies on CUDA.",
        ]
        return "\n".join(advice)
    return (
        f"COMPUTE-BOUND: {numbers}.\nThe input pipeline keeps up. Speed up the step itself: mixed precision "
        "(torch.amp), channels_last, a larger batch, torch.compile; more loader work will not help."
    )


# --- decoding ----------------------------------------------------------------------------------------------------


def jpeg_decode_benchmark(paths: list[Path], device: torch.device, repeats: int = 3) -> list[dict[str, Any]]:
    """Images/s decoding the same JPEG files: PIL, torchvision on the CPU, torchvision (nvJPEG) on CUDA when there
    is a GPU, and NVIDIA DALI when it is installed; rows that cannot run say why instead of a number."""
    from torchvision.io import decode_jpeg, read_file

    from .images import load_rgb_image

    encoded = [read_file(str(p)) for p in paths]
    rows: list[dict[str, Any]] = []

    def timed(name: str, decode: Callable[[], Any], sync: torch.device | None = None) -> None:
        decode()  # warm-up: library initialisation, nvJPEG handles
        start = time.perf_counter()
        for _ in range(repeats):
            decode()
        if sync is not None:
            synchronize(sync)
        rows.append({"decoder": name, "images_per_s": repeats * len(paths) / (time.perf_counter() - start)})

    timed("PIL (Image.open + load), CPU", lambda: [load_rgb_image(p) for p in paths])
    timed("torchvision.io.decode_jpeg, CPU", lambda: decode_jpeg(encoded))
    if device.type == "cuda":
        timed(f"torchvision.io.decode_jpeg, {device} (nvJPEG)", lambda: decode_jpeg(encoded, device=device), device)
    else:
        rows.append({"decoder": "torchvision.io.decode_jpeg on CUDA", "images_per_s": None,
                     "note": "skipped: no CUDA device here"})  # fmt: skip
    rows.append(_dali_row(paths, repeats, device))
    return rows


def _dali_row(paths: list[Path], repeats: int, device: torch.device) -> dict[str, Any]:
    """NVIDIA DALI's file reader + mixed (nvJPEG) decoder, when DALI and a GPU are there; never required."""
    try:
        from nvidia.dali import fn, pipeline_def
    except ImportError:
        return {"decoder": "NVIDIA DALI", "images_per_s": None,
                "note": "skipped: DALI is not installed (optional: pip install nvidia-dali-cuda120)"}  # fmt: skip
    if device.type != "cuda":
        return {"decoder": "NVIDIA DALI", "images_per_s": None, "note": "skipped: DALI decodes on a GPU"}
    batch = len(paths)

    @pipeline_def(batch_size=batch, num_threads=4, device_id=device.index or 0)
    def decode_pipeline():
        jpegs, _ = fn.readers.file(files=[str(p) for p in paths])
        return fn.decoders.image(jpegs, device="mixed")

    pipe = decode_pipeline()
    pipe.build()
    pipe.run()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        pipe.run()
    return {"decoder": "NVIDIA DALI (file reader + mixed decoder)", "images_per_s": repeats * batch / (time.perf_counter() - start)}


# --- the SR ladder -----------------------------------------------------------------------------------------------


@dataclass
class Rung:
    """One rung of a loader ladder: a name, how to build its loader, the model its batches feed, and its step."""

    name: str
    build: Callable[[], Iterable]
    model: Callable[[], nn.Module]
    workers: int = 0
    make_step: Callable[[nn.Module], Callable[[Any], Any]] = sr_train_step


def run_ladder(
    rungs: list[Rung], device: torch.device, loader_batches: int, steps_per_block: int, blocks: int
) -> list[dict[str, Any]]:
    """Measure every rung side by side in this process: loader alone, then feeding its model (interleaved)."""
    from tqdm import tqdm

    from .env import usable_cpu_count

    rows = []
    for rung in tqdm(rungs, desc="ladder", unit="rung"):
        loader = rung.build()
        alone = measure_loader(loader, loader_batches, warmup=max(1, rung.workers))
        torch.manual_seed(0)
        model = rung.model().to(device)
        fed = measure_pipeline(loader, rung.make_step(model), device, steps_per_block, blocks)
        rows.append(
            {
                "name": rung.name,
                "samples_per_s": alone["samples_per_s"],
                "pipeline_efficiency": fed.pipeline_efficiency,
                "fed_samples_per_s": fed.samples_per_s,
                "ideal_samples_per_s": fed.ideal_samples_per_s,
                "data_wait_ms": fed.data_wait_ms,
                "compute_ms": fed.compute_ms,
                "peak_rss_mib": max(alone["peak_rss_mib"], fed.peak_rss_mib),
                "peak_device_mib": fed.peak_device_mib,
                "doctor": diagnose_pipeline(fed, rung.workers, usable_cpu_count()).splitlines()[0],
            }
        )
        for item in (loader, model):
            cleanup = getattr(getattr(item, "dataset", item), "cleanup", None)
            if callable(cleanup):
                cleanup()
        del loader, model
    first = rows[0]["samples_per_s"]
    for row in rows:
        row["speedup_vs_first"] = row["samples_per_s"] / first
    return rows


def ladder_table(rows: list[dict[str, Any]], label: str = "") -> str:
    """A markdown table of a ladder's rows."""
    lines = [
        f"{label}\n" if label else "",
        "| rung | loader samples/s | × first | fed samples/s | efficiency | data-wait ms | compute ms | peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['samples_per_s']:.0f} | {r['speedup_vs_first']:.1f} | {r['fed_samples_per_s']:.0f} | "
            f"{r['pipeline_efficiency']:.2f} | {r['data_wait_ms']:.1f} | {r['compute_ms']:.1f} | {r['peak_rss_mib']:.0f} |"
        )
    return "\n".join(lines)


def sr_ladder(
    paths: list[Path],
    device: torch.device,
    batch_size: int,
    scale: int = 4,
    hr_crop: int = 128,
    workers: int = 2,
    seed: int = 0,
    samples_per_epoch: int = 4096,
) -> list[Rung]:
    """The SR ladder's rungs: traditional from disk and in memory, lazy crop plain and tuned, decoded uint8 cache."""
    from .datasets import CachedCropLoader, DecodedSRCache, InMemoryNaiveSRDataset, LazyCropSRDataset, NaiveSRDataset
    from .loading import make_loader
    from .models import ESPCN

    pin = device.type == "cuda"
    common = {"seed": seed, "samples_per_epoch": samples_per_epoch, "pin_memory": pin}

    def naive_disk():
        return make_loader(NaiveSRDataset(paths, scale, hr_crop, seed=seed), batch_size, **common)

    def naive_memory():
        return make_loader(InMemoryNaiveSRDataset(paths, scale, hr_crop, seed=seed), batch_size, **common)

    def lazy_plain():
        return make_loader(LazyCropSRDataset(paths, scale, hr_crop, seed=seed), batch_size, **common)

    def lazy_tuned():
        dataset = LazyCropSRDataset(paths, scale, hr_crop, seed=seed)
        return make_loader(
            dataset, batch_size, num_workers=workers, prefetch_factor=4, persistent_workers=True, **common
        )

    def cached():  # uint8 all the way to the device; the step makes it float there
        return CachedCropLoader(DecodedSRCache(paths, scale), batch_size, hr_crop, 10**6, seed, device, as_float=False)

    def upscaled_input_model():
        return ESPCN(scale=1)  # the same network on pre-upscaled inputs: 16x the pixels at x4

    def lr_input_model():
        return ESPCN(scale=scale)

    return [
        Rung("naive: pre-upscaled files from disk (seed's traditional way)", naive_disk, upscaled_input_model),
        Rung("naive: pre-upscaled float tensors in memory", naive_memory, upscaled_input_model),
        Rung("lazy crop, num_workers=0", lazy_plain, lr_input_model),
        Rung(f"lazy crop, {workers} workers, prefetch 4, persistent", lazy_tuned, lr_input_model, workers),
        Rung("decoded uint8 cache, batch crops", cached, lr_input_model),
    ]


def classification_train_step(model: nn.Module, lr: float = 0.05) -> Callable[[Any], float]:
    """The classification benchmark step: cross-entropy, SGD with momentum."""
    return plain_train_step(model, torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9), nn.CrossEntropyLoss())


def seed_post_transform() -> Callable[[Any], torch.Tensor]:
    """The CIFAR post's per-sample PIL pipeline: RandomResizedCrop(224), flip, ColorJitter, ToTensor, Normalize."""
    from torchvision import transforms

    return transforms.Compose(
        [
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ColorJitter(0.2, 0.2, 0.2),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ]
    )


def native_size_transform() -> Callable[[Any], torch.Tensor]:
    """The same family per sample with PIL at CIFAR's own 32 px: crop with padding, flip, jitter, grayscale."""
    from torchvision import transforms

    from .augment import CIFAR10_MEAN, CIFAR10_STD

    return transforms.Compose(
        [
            transforms.RandomCrop(32, padding=4, padding_mode="reflect"),
            transforms.RandomHorizontalFlip(),
            transforms.RandomApply([transforms.ColorJitter(0.2, 0.2, 0.2, 0.05)], p=0.8),
            transforms.RandomGrayscale(p=0.2),
            transforms.ToTensor(),
            transforms.Normalize(CIFAR10_MEAN, CIFAR10_STD),
        ]
    )


def cifar_ladder(
    images: torch.Tensor,
    labels: torch.Tensor,
    image_folder: Path,
    device: torch.device,
    batch_size: int,
    model: Callable[[], nn.Module],
    workers: int = 2,
    seed: int = 0,
) -> list[Rung]:
    """The classification ladder: the seed post's ImageFolder + PIL pipeline, the same at 32 px, and the whole
    dataset as one uint8 tensor on the device with kornia batch augmentation (with and without augmentation)."""
    from torchvision.datasets import ImageFolder

    from .augment import cifar_train_augment
    from .loading import DeviceTensorLoader, make_loader

    pin = device.type == "cuda"
    samples = 10**6  # an epoch long enough that no measurement restarts the workers
    seed_workers = min(4, max(1, workers))  # the post's num_workers=4, capped by the cores here

    def seed_post():
        dataset = ImageFolder(str(image_folder), transform=seed_post_transform())
        return make_loader(dataset, batch_size, seed=seed, num_workers=seed_workers, pin_memory=pin,
                           persistent_workers=True, samples_per_epoch=samples)  # fmt: skip

    def native_pil():
        dataset = ImageFolder(str(image_folder), transform=native_size_transform())
        return make_loader(dataset, batch_size, seed=seed, num_workers=seed_workers, pin_memory=pin,
                           persistent_workers=True, samples_per_epoch=samples)  # fmt: skip

    def on_device(augment: bool):
        def build():
            transform = cifar_train_augment().to(device) if augment else None
            return DeviceTensorLoader(images, labels, batch_size, device, transform, drop_last=True, seed=seed)

        return build

    return [
        Rung(f"seed post: ImageFolder PNG + PIL per sample, RandomResizedCrop(224), {seed_workers} workers",
             seed_post, model, seed_workers, classification_train_step),
        Rung(f"ImageFolder PNG + PIL per sample at 32 px (crop, flip, jitter, grayscale), {seed_workers} workers",
             native_pil, model, seed_workers, classification_train_step),
        Rung("whole dataset as uint8 on the device + kornia batch augmentation (crop, flip, jitter, grayscale)",
             on_device(True), model, 0, classification_train_step),
        Rung("whole dataset as uint8 on the device, no augmentation (the ceiling)", on_device(False), model, 0,
             classification_train_step),
    ]  # fmt: skip


def _sr_command(args: argparse.Namespace, profile, device: torch.device) -> tuple[list[dict[str, Any]], str, str]:
    from .data import bsds300_split, prepare_bsds300
    from .env import usable_cpu_count

    source = prepare_bsds300(progress=False)
    paths = bsds300_split(source.root, "train")
    batch_size = args.batch_size or 16
    workers = max(1, min(8, usable_cpu_count()))
    rungs = sr_ladder(paths, device, batch_size, args.scale, args.hr_crop, workers)
    rows = run_ladder(rungs, device, profile.bench_loader_batches, profile.bench_steps_per_block, profile.bench_blocks)
    label = (
        f"SR ladder, x{args.scale}, {args.hr_crop}-px HR crops, batch {batch_size}, {len(paths)} images of "
        f"{source.name}, ESPCN training step, profile {profile.name}"
    )
    return rows, label, source.describe()


def _cifar_command(args: argparse.Namespace, profile, device: torch.device) -> tuple[list[dict[str, Any]], str, str]:
    from .data import cifar10_class_names, data_root, export_image_folder, load_cifar10, prepare_cifar10
    from .env import usable_cpu_count
    from .models import SmallConvNet, cifar_resnet18

    source = prepare_cifar10(progress=False)
    images, labels = load_cifar10(source.root, train=True)
    if profile.cifar_images:
        images, labels = images[: profile.cifar_images], labels[: profile.cifar_images]
    slug = "standin" if source.is_standin else "cifar10"
    folder = export_image_folder(
        images, labels, cifar10_class_names(source.root), data_root() / "imagefolder" / f"{slug}-{len(images)}"
    )
    use_resnet = profile.name == "full"
    batch_size = args.batch_size or (256 if use_resnet else 64 if profile.is_smoke else 128)
    model = cifar_resnet18 if use_resnet else (lambda: SmallConvNet(width=16))
    rungs = cifar_ladder(images, labels, folder, device, batch_size, model, max(1, usable_cpu_count()))
    # A CPU step on the seed's 224-px inputs takes seconds, so the CPU profiles time fewer of them.
    steps, blocks = profile.bench_steps_per_block, profile.bench_blocks
    if not use_resnet:
        steps, blocks = min(steps, 2), min(blocks, 3)
    rows = run_ladder(rungs, device, profile.bench_loader_batches, steps, blocks)
    label = (
        f"CIFAR ladder, batch {batch_size}, {len(images)} images of {source.name}, "
        f"{'ResNet18 (CIFAR stem)' if use_resnet else 'small CNN (width 16)'} training step, profile {profile.name}"
    )
    return rows, label, source.describe()


def main(argv: list[str] | None = None) -> int:
    """Command line: python -m helpers.bench sr|cifar --json PATH [--profile auto|smoke|cpu|full]."""
    from .env import environment_report, format_environment_report, resolve_device, seed_everything
    from .profiles import resolve_profile

    parser = argparse.ArgumentParser(description="Run a loader ladder side by side in one process.")
    parser.add_argument("ladder", choices=["sr", "cifar"], help="sr: super-resolution on BSDS300; cifar: CIFAR-10")
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    parser.add_argument("--profile", default="auto", help="auto, smoke, cpu or full (COURSE_PROFILE overrides)")
    parser.add_argument("--scale", type=int, default=4, help="sr: the upscaling factor")
    parser.add_argument("--hr-crop", type=int, default=128, help="sr: HR crop size")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 16 for sr, 256 for cifar")
    args = parser.parse_args(argv)

    profile = resolve_profile(args.profile)
    device = resolve_device()
    seed_everything(0)
    command = _sr_command if args.ladder == "sr" else _cifar_command
    rows, label, data = command(args, profile, device)
    environment = format_environment_report(environment_report(device))
    print(ladder_table(rows, profile.label(f"{label}\n{environment}")))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"ladder": args.ladder, "profile": profile.name, "device": str(device), "label": label,
                   "environment": environment, "data": data, "rungs": rows}  # fmt: skip
        args.json.write_text(json.dumps(payload, indent=2))
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
