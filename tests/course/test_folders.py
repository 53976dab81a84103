"""07's course layer: the stand-in JPEG folder (ImageFolder layout, sizes, JPEG quality, written once), rung
verdicts that say when ranges overlap, the optional peers' reasons, and the bench's crop + flip rung."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image
from torchvision.datasets import ImageFolder

from helpers.course.cifar_peers import FFCV_MISSING, crop_flip_build, ffcv_cifar_build
from helpers.course.folders import (
    FOLDER_MARKER,
    OnDevice,
    finish_on_device,
    optional_rows,
    write_jpeg_folder_standin,
)
from helpers.course.ladder_row import LadderRow
from helpers.course.profiles import PROFILES
from helpers.course.sr_formats import MARKER, png_copies, same_pixels
from helpers.course.standins import CIFAR_STANDIN_CLASSES
from helpers.course.verdicts.your_own_images import folder_rung_verdicts, storage_verdict


def test_the_standin_is_an_image_folder_of_photo_sized_jpegs_written_once(tmp_path):
    root = write_jpeg_folder_standin(tmp_path / "folder", images_per_class=5, image_size=(100, 75))
    dataset = ImageFolder(str(root))
    assert sorted(dataset.classes) == sorted(CIFAR_STANDIN_CLASSES) and len(dataset) == 50
    sizes = set()
    for path, _ in dataset.samples:
        with Image.open(path) as image:
            assert image.format == "JPEG"
            sizes.add(image.size)
    assert sizes == {(100, 75), (75, 100)}  # landscape, and every fifth portrait
    first = [Image.open(p).tobytes() for p, _ in dataset.samples[:5]]
    assert len(set(first)) == 5  # different cuts, not copies
    stamp = (root / FOLDER_MARKER).stat().st_mtime_ns
    write_jpeg_folder_standin(root, images_per_class=5, image_size=(100, 75))
    assert (root / FOLDER_MARKER).stat().st_mtime_ns == stamp


def test_profiles_size_the_lesson_as_the_issue_asks():
    for name in ("cpu", "full"):
        sizes = PROFILES[name].folders
        assert sizes.images_per_class * len(CIFAR_STANDIN_CLASSES) >= 1000 and sizes.image_size == (500, 375)
        assert sizes.crop == 224
    assert PROFILES["smoke"].folders.images_per_class * 10 <= 50


def _row(name: str, rate: float, low: float, high: float, role: str = "") -> LadderRow:
    """A ladder row as run_ladder makes it (helpers.course.ladder._row)."""
    return LadderRow(
        name=name,
        role=role,
        threads=1,
        loader_samples_per_s=rate,
        loader_samples_per_s_range=(low, high),
        fed_samples_per_s=rate / 2,
        fed_samples_per_s_range=(low / 2, high / 2),
        premade_samples_per_s=rate,
        premade_samples_per_s_range=(low, high),
        pipeline_efficiency=0.5,
        efficiency_range=(0.4, 0.6),
        data_wait_ms=1.0,
        compute_ms=1.0,
        premade_step_ms=0.5,
        rounds=3,
        steps_per_turn=1,
        doctor="INPUT-BOUND: ...",
    )


def test_verdicts_say_when_ranges_overlap():
    rows = [
        _row("the post", 100, 90, 110, "post"),
        _row("reduced", 105, 95, 115, "box first"),
        _row("pre-resized", 400, 380, 420, "store"),
        _row("whole", 300, 280, 320, "whole-JPEG batch"),
        _row("WebDataset", 390, 370, 410, "shards"),
    ]
    lines = folder_rung_verdicts(rows)
    assert "'post' is the reference" in lines[0] and "within the noise of this machine" in lines[1]
    assert lines[2].startswith("'store', loader alone against 'post': 4.0x (range 3.45–4.67x); the doctor reads")
    assert all(len(line.split()) <= 60 for line in lines)
    assert lines[0] == "'post' is the reference; the doctor reads INPUT-BOUND: 50% of each fed step waits for data."
    assert "store against shards, within the noise" in storage_verdict(rows)
    rows[4] = _row("WebDataset", 200, 190, 210, "shards")
    assert "store is fastest here, against shards 2.0x (range 1.81–2.21x)" in storage_verdict(rows)
    # found by role, not by place: a rung inserted first changes nothing
    rows.insert(0, _row("an extra rung", 5000, 4900, 5100, "extra"))
    assert "store is fastest here, against shards 2.0x (range 1.81–2.21x)" in storage_verdict(rows)
    assert "against 'post': 4.0x (range 3.45–4.67x)" in folder_rung_verdicts(rows)[3]


def test_optional_peers_say_why_they_have_no_row():
    for name, why in optional_rows():
        assert name in {"NVIDIA DALI", "FFCV"} and why.startswith("not installed")
    if FFCV_MISSING is not None:
        images = torch.zeros(4, 3, 32, 32, dtype=torch.uint8)
        assert (
            ffcv_cifar_build(
                images, torch.zeros(4, dtype=torch.long), dest=None, device=torch.device("cpu"), batch_size=2, workers=1
            )
            is None
        )


def test_the_bench_crop_flip_rung_and_the_device_finish():
    images = torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8)
    loader = crop_flip_build(images, torch.arange(8), device=torch.device("cpu"), batch_size=4)()
    batch, labels = next(iter(loader))
    assert batch.dtype == torch.float32 and batch.shape == (4, 3, 32, 32) and len(labels) == 4
    finished = OnDevice([(images, torch.arange(8))], finish_on_device(), torch.device("cpu"))
    out, _ = next(iter(finished))
    assert out.is_contiguous(memory_format=torch.channels_last) and out.dtype == torch.float32


def test_png_copies_hold_the_same_pixels_and_are_written_once(tmp_path):
    paths = []
    for i in range(3):
        path = tmp_path / f"photo{i}.jpg"
        Image.fromarray(np.random.default_rng(i).integers(0, 256, (30, 40, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    copies = png_copies(paths, tmp_path / "png")
    assert [Image.open(c).format for c in copies] == ["PNG"] * 3
    assert all(same_pixels(p, c) for p, c in zip(paths, copies))
    stamp = (tmp_path / "png" / MARKER).stat().st_mtime_ns
    assert png_copies(paths, tmp_path / "png") == copies and (tmp_path / "png" / MARKER).stat().st_mtime_ns == stamp


def test_classifier_builds_07s_models_from_the_registry():
    from helpers.course.folders import classifier

    resnet = classifier("resnet18")()
    assert resnet.conv1.stride == (2, 2) and resnet.fc.out_features == 10  # ImageNet stem, the 10 stand-in classes
    assert resnet.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    assert classifier("small")().features[0].out_channels == 16
