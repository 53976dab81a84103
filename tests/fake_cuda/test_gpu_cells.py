"""Notebook cells that run only on CUDA, run here as a GPU machine would run them: lesson 02's GPU utilisation cell,
executed from the notebook itself with DEVICE on `cuda`, says "not measured: NVML missing" where nvidia-ml-py is
not installed (it raised before), and samples the GPU CUDA uses, found in NVML by its UUID, where it is."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import nbformat
import torch

from helpers.timeline import GpuUtilisation, gpu_utilisation_unavailable

ROOT = Path(__file__).resolve().parents[2]


def _cell(notebook: str, marker: str) -> str:
    cells = nbformat.read(ROOT / "notebooks" / notebook, as_version=4).cells
    (source,) = [c.source for c in cells if c.cell_type == "code" and marker in c.source]
    return source


def _run_utilisation_cell(printed: list[str]) -> dict:
    namespace = {
        "DEVICE": torch.device("cuda"),
        "feeds": {"lazy crop, num_workers=0": [1, 2], "decoded cache": [3]},
        "step": lambda batch: None,
        "timeline_steps": 2,
        "step_timeline": lambda loader, step, *, steps, device: [step(b) for b in loader],
        "summaries": {"lazy crop, num_workers=0": {"wait_fraction": 0.5}, "decoded cache": {"wait_fraction": 0.1}},
        "LESSON": types.SimpleNamespace(tag=lambda text, source=None: text),
        "source": None,
        "GpuUtilisation": GpuUtilisation,
        "gpu_utilisation_unavailable": gpu_utilisation_unavailable,
        "print": printed.append,
    }
    exec(compile(_cell("02_lazy_crop_dataset.ipynb", "GpuUtilisation("), "02 cell", "exec"), namespace)
    return namespace


def test_the_utilisation_cell_says_nvml_is_missing_instead_of_raising(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed
    printed: list[str] = []
    _run_utilisation_cell(printed)
    assert printed == ["GPU utilisation not measured: NVML missing (its Python bindings: pip install nvidia-ml-py)"]


def test_the_utilisation_cell_samples_the_gpu_cuda_uses(monkeypatch):
    class NVMLError(Exception):
        pass

    handles = {"GPU-0f0e0d0c-aaaa-bbbb-cccc-000000000001": "the GPU CUDA calls 0"}
    fake = types.SimpleNamespace(
        NVMLError=NVMLError,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByUUID=lambda uuid: handles[uuid],
        nvmlDeviceGetHandleByPciBusId=lambda bus: "another GPU",
        nvmlDeviceGetHandleByIndex=lambda index: "NVML's GPU 0, which CUDA may not call 0",
        nvmlDeviceGetUtilizationRates=lambda handle: types.SimpleNamespace(gpu=80 if handle in handles.values() else 0),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    properties = types.SimpleNamespace(uuid="0f0e0d0c-aaaa-bbbb-cccc-000000000001", pci_domain_id=0, pci_bus_id=1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: properties)
    printed: list[str] = []
    namespace = _run_utilisation_cell(printed)
    assert namespace["utilisation"] == {"lazy crop, num_workers=0": 80, "decoded cache": 80}
    assert (
        printed[0]
        == "'lazy crop, num_workers=0': GPU utilisation 80% (NVML mean) while waiting 50% of the time for data"
    )


def test_lesson_04s_copy_and_prefetch_rows_warm_every_way_up_before_timing_it(fake_cuda):
    """Without a warm-up the first round's first row also paid CUDA's start-up and the allocator's first blocks."""
    from helpers.course.overlap import copy_rows, prefetch_rows

    with fake_cuda() as traffic:
        rows = copy_rows(torch.device("cuda"), batch=2, side=8, copies=3, rounds=2)
        copies = traffic.device_ops["_to_copy.default"]
        steps = prefetch_rows(torch.device("cuda"), batch=2, side=8, steps=4, rounds=2)
        convolutions = traffic.device_ops["convolution.default"]
    assert [r["rounds"] for r in rows] == [2] * 4 and [r["rounds"] for r in steps] == [2, 2]
    assert copies == 4 * 3 * (2 + 1)  # four ways, three copies each, two timed rounds and one untimed pass
    assert convolutions == 2 * 4 * (2 + 1)  # two ways, four steps each


def test_lesson_07s_rungs_all_pin_their_batches_on_cuda_as_the_posts_does(fake_cuda, tmp_path):
    """A rung whose batches come from pageable memory would also pay a copy that waits, which the post's rung
    (pin_memory=True) does not: every rung that copies from the host pins, on CUDA only."""
    from torchvision.datasets import ImageFolder

    from helpers.course.folders import folder_ladder, write_jpeg_folder_standin
    from helpers.resized_store import ResizedStore, build_resized_store
    from helpers.shards import write_shards

    root = write_jpeg_folder_standin(tmp_path / "folder", images_per_class=1, image_size=(64, 48))
    samples = ImageFolder(str(root)).samples
    store = ResizedStore(build_resized_store(samples, tmp_path / "store", short_side=40))
    shards = write_shards(samples, tmp_path / "shards", per_shard=4)
    for device in (torch.device("cuda"), torch.device("cpu")):
        with fake_cuda():
            rungs = folder_ladder(root, store, shards, device=device, size=32, batch=2, workers=0, model=None)
            loaders = [rung.build() for rung in rungs]
        pinned = [getattr(loader, "loader", loader).pin_memory for loader in loaders]
        assert pinned == [device.type == "cuda"] * len(rungs), [rung.role for rung in rungs]
