"""What the pipeline doctor advises for a bottleneck, in order, from what the pipeline already is (never what it
already uses; the task's own pieces), each change with the lesson of the course that teaches and measures it; and the
notes that hold whatever the bottleneck (a knob that does nothing here, how a prefetching loader was measured).

    >>> facts = PipelineFacts(loader="DataLoader", num_workers=1, cpu_cores=2, intra_op_threads=1)
    >>> advice_for("LOADER COMPETES WITH THE STEP", facts)[0][:40]
    '- the CPU budget already holds (1 worker'

Copy with: pipeline_facts.py (what the pipeline is) with env.py, loadmeter.py (the CPU budget), bottleneck.py (the
line a cost must reach).
Needs: psutil, torch.
"""

from __future__ import annotations

from .bottleneck import SIGNIFICANT_PCT
from .loadmeter import cpu_budget
from .pipeline_facts import FOLDER_CROPS, ON_DEVICE_LOADERS, PipelineFacts

FILE_FOLDERS = {"ImageFolder", "DatasetFolder"}  # torchvision datasets that decode a file per sample

LESSON_DECODE = "lesson 02: the lazy-crop dataset and the decoded cache"
LESSON_BUDGET = "lesson 02: the CPU budget"
LESSON_DEVICE = "lesson 04: augmentation and the whole dataset on the device"
LESSON_COPY = "lesson 04: overlap the copy"
LESSON_STEP = "lesson 03: precision and the step-side speed-ups"
LESSON_FOLDER = "lesson 07: reduced-size decoding and the pre-resized store"


def _decode_once(facts: PipelineFacts) -> list[str]:
    """Keep decoded pixels instead of decoding files per sample, with the pieces for the task (none if in use)."""
    if facts.task == "classification" and facts.loader != "DeviceTensorLoader":
        # a folder of files holds whole photographs, not its crops: keep them decoded once at a smaller size instead
        fits = (
            facts.dataset not in FILE_FOLDERS
            and facts.dataset_bytes is not None
            and (facts.free_device_bytes is None or facts.dataset_bytes < 0.5 * facts.free_device_bytes)
        )
        instead = "per-sample indexing and collation" if facts.decoded else "PIL transforms per sample"
        if fits:
            assert facts.dataset_bytes is not None  # fits says so
            size = facts.dataset_bytes / 2**20
            return [
                f"- the whole dataset as one uint8 tensor on the device ({size:.{0 if size >= 10 else 1}f} MiB): "
                "DeviceTensorLoader (loading.py), augmented per sample there with cifar_train_augment() "
                f"(augment.py), instead of {instead} ({LESSON_DEVICE});"
            ]
        if facts.dataset in FOLDER_CROPS:
            return (
                [
                    "- the crop and resize per sample on the CPU remain: decode whole batches and augment them on the "
                    f"device (decode_jpegs + device_train_augment, device_crop.py; {LESSON_FOLDER});"
                ]
                if facts.device.startswith("cuda")
                else []
            )
        if not facts.decoded:
            return [
                "- decode fewer pixels: JPEGs at reduced size (ReducedCropDataset, jpeg_crop.py) or a pre-resized "
                f"uint8 store (StoreCropDataset, resized_store.py), and augment batches on the device ({LESSON_FOLDER});"
            ]
    if facts.decoded or facts.task == "classification":
        return []
    if facts.task == "super-resolution":
        return [
            "- decode once: DecodedSRCache + CachedCropLoader (sr_cache.py) keep every image as uint8 and cut "
            f"paired crops by indexing, instead of decoding files per sample ({LESSON_DECODE});"
        ]
    return [
        f"- decode once: keep decoded uint8 images in memory instead of decoding files per sample ({LESSON_DECODE});"
    ]


def _loader_knobs(facts: PipelineFacts) -> list[str]:
    """More workers and their knobs, only where they are not in use yet."""
    if facts.num_workers is None:
        return []
    lines = []
    if facts.num_workers < facts.cpu_cores - 1 and not facts.decoded:  # the CPU budget: the step keeps a core
        lines.append(
            f"- more DataLoader workers ({facts.num_workers} now, {facts.cpu_cores} cores), keeping workers + "
            f"intra-op threads within the cores (torch.set_num_threads; {LESSON_BUDGET});"
        )
    if facts.num_workers > 0 and not facts.persistent_workers:
        lines.append(f"- persistent_workers=True, so workers are not restarted every epoch ({LESSON_DECODE});")
    if facts.device.startswith("cuda") and not facts.pin_memory and facts.inputs_device == "cpu":
        lines.append(
            f"- pin_memory=True, so host-to-device copies are asynchronous (non_blocking=True; {LESSON_COPY});"
        )
    return lines


def _on_the_device(facts: PipelineFacts) -> list[str]:
    """uint8 to the device and augmentation there, where the batch does not arrive that way yet."""
    lines = []
    if facts.inputs_device == "cpu" and facts.inputs_dtype and facts.inputs_dtype != "torch.uint8":
        where = "on the device" if facts.device.startswith("cuda") else "in the step"
        lines.append(
            f"- send uint8 batches (a quarter of the bytes of float32) and make them float {where} ({LESSON_DEVICE});"
        )
    if facts.device.startswith("cuda") and not facts.augments_on_device:
        if facts.task == "super-resolution":
            lines.append(
                f"- DeviceSRCropLoader (sr_cache.py): paired crops, flips and LR made on the GPU ({LESSON_DEVICE});"
            )
        elif facts.task == "classification" and facts.loader != "DeviceTensorLoader" and not _decode_once(facts):
            lines.append(
                "- batch augmentation on the device (cifar_train_augment() in augment.py, kornia) instead "
                f"of per-sample transforms ({LESSON_DEVICE});"
            )
    if facts.loader in ON_DEVICE_LOADERS:
        lines.append(
            "- the loader already makes its batches on the device: what remains is its own work per batch; "
            "time it alone (measure.time_batches), lighten its augmentation, or take larger batches;"
        )
    return lines


def _step_speedups(facts: PipelineFacts) -> list[str]:
    lines = [
        f"- no cost of the loader reaches {SIGNIFICANT_PCT}% of a step, so the step itself is where the time goes: "
        f"speed it up first ({LESSON_STEP}):"
    ]
    if facts.precision == "fp32":
        lines.append(
            "- mixed precision: TrainStep(precision='bf16', or 'fp16' with its GradScaler) where the device "
            f"runs it natively (step.py's fastest_precision measures which; {LESSON_STEP});"
        )
    elif facts.precision is None:
        lines.append(
            "- mixed precision with torch.autocast (bf16, or fp16 with a GradScaler), if your step does not use it "
            f"yet ({LESSON_STEP});"
        )
    if facts.channels_last is False and facts.inputs_ndim == 4:
        lines.append(f"- channels_last (TrainStep(channels_last=True)) for convolutions ({LESSON_STEP});")
    lines.append(f"- a larger batch, and torch.compile on the model ({LESSON_STEP});")
    return lines


def _cpu_budget(facts: PipelineFacts, other_cores: float | None) -> list[str]:
    """Workers + intra-op threads against the cores left by other processes: fit them where they exceed and the CPU
    budget gives fewer; where the budget already holds (or gives the same), say so and make the samples cheaper."""
    if not facts.num_workers or facts.device.startswith("cuda"):
        return []
    workers, threads, cores = facts.num_workers, facts.intra_op_threads, facts.cpu_cores
    busy = max(0, round(other_cores or 0.0))
    fit = cpu_budget(workers, cores, busy)
    others = f", other processes using {other_cores:.1f} of them" if busy else ""
    if workers + threads > cores - busy and fit != (workers, threads):
        free = f"{cores} cores"
        if busy and cores > busy:
            free = f"the {cores - busy} of {cores} cores other processes left free ({other_cores:.1f} used)"
        elif busy:
            free = f"the cores other processes left free (they used {other_cores:.1f} of {cores})"
        return [
            f"- fewer DataLoader workers or intra-op threads: {workers} worker{'s' * (workers != 1)} + {threads} "
            f"thread{'s' * (threads != 1)} exceed {free}; num_workers={fit[0]} and torch.set_num_threads({fit[1]}) "
            f"fit them (loadmeter.cpu_budget; {LESSON_BUDGET});"
        ]
    why = "cpu_budget gives the same" if fit == (workers, threads) else "within the cores"
    cheaper = _decode_once(facts) or _on_the_device(facts)
    lighten = (
        f"- lighten the dataset's per-sample work (its __getitem__), or move it onto the device ({LESSON_DEVICE});"
    )
    return [
        f"- the CPU budget already holds ({workers} worker{'s' * (workers != 1)} + {threads} intra-op "
        f"thread{'s' * (threads != 1)} for {cores} cores{others}; {why}), so the fix is not fewer of them: each "
        f"sample costs the workers CPU that the step needs, so make samples cheaper ({LESSON_BUDGET}):",
        *(cheaper or [lighten]),
    ]


def _overlap_the_copy(facts: PipelineFacts) -> list[str]:
    """The copy to the device from page-locked memory, asynchronous, smaller, overlapped with the step."""
    lines = []
    if facts.num_workers is not None and not facts.pin_memory:
        lines.append(
            "- pin_memory=True in the DataLoader and .to(device, non_blocking=True) in the step: the copy from "
            f"page-locked memory runs without holding up the host ({LESSON_COPY});"
        )
    if facts.inputs_dtype and facts.inputs_dtype != "torch.uint8":
        lines.append(
            f"- send uint8 batches (a quarter of float32's bytes) and normalise on the device ({LESSON_COPY});"
        )
    if facts.loader != "PrefetchLoader":
        lines.append(
            "- PrefetchLoader (prefetch.py): the next batch copied on a side stream while the step runs "
            f"({LESSON_COPY});"
        )
    return lines


def advice_for(verdict: str, facts: PipelineFacts, *, other_cores: float | None = None) -> list[str]:
    """What to try for a verdict, in order, from what the pipeline already is (nothing it already uses), each with
    the lesson that teaches it; `other_cores` is what other processes used meanwhile (the load meter's reading)."""
    if verdict == "INPUT-BOUND":
        lines = _decode_once(facts) + _loader_knobs(facts) + _on_the_device(facts)
    elif verdict == "LOADER COMPETES WITH THE STEP":
        lines = _cpu_budget(facts, other_cores) or _decode_once(facts) + _on_the_device(facts)
        if facts.device.startswith("cuda"):
            lines.append(
                "- the host work between steps delays the next launch: move per-sample work into workers or "
                f"onto the device ({LESSON_DEVICE});"
            )
    elif verdict == "TRANSFER-BOUND":
        lines = _overlap_the_copy(facts)
    elif verdict == "COMPUTE-BOUND":
        lines = _step_speedups(facts)
    else:
        lines = ["- nothing was measured to decide on: rerun with a larger budget_s (more steps per block);"]
    if other_cores is not None and other_cores >= 0.5:
        lines.append("- rerun with the other processes stopped to confirm (the machine was busy).")
    return lines


def notes_for(facts: PipelineFacts) -> list[str]:
    """What holds whatever the bottleneck: knobs that do nothing on this device, how a prefetching loader is timed."""
    notes = []
    if facts.pin_memory and not facts.device.startswith("cuda"):
        notes.append(
            "pin_memory=True does nothing without a GPU: it page-locks batches for asynchronous copies to CUDA, and "
            f"the step here runs on {facts.device} (keep it for a GPU, or drop it)."
        )
    if facts.loader == "PrefetchLoader" and facts.device.startswith("cuda"):
        notes.append(
            "PrefetchLoader copies the next batch on a side stream while the step runs: between steps the doctor "
            "waits for the current stream only, so the copy it hides behind the step is not charged as data-wait; "
            "what it does not hide is."
        )
    return notes
