"""Lesson 05's pitfall list: LR made by each library against MATLAB's, and the verdicts read their numbers."""

from __future__ import annotations

import sys

import pytest
import torch
from skimage import data as skdata

from helpers.course.claims import resize_rows
from helpers.course.verdicts.train_super_resolution import allocator_verdict, amp_memory_verdict, resize_verdict


@pytest.fixture(scope="module")
def hr_images() -> list[torch.Tensor]:
    photo = torch.from_numpy(skdata.astronaut()).permute(2, 0, 1).float() / 255
    return [photo[:, :96, :128].contiguous(), photo[:, 200:296, 200:328].contiguous()]


def test_matlab_is_the_reference_and_opencv_cubic_is_farther_than_pillow(hr_images):
    pytest.importorskip("cv2")
    rows = {r["way"]: r for r in resize_rows(hr_images, 4)}
    assert rows["MATLAB imresize (the protocol)"]["lr_psnr_vs_matlab"] == float("inf")
    pillow, cubic = rows["Pillow BICUBIC"], rows["OpenCV INTER_CUBIC"]
    # Pillow antialiases as MATLAB does; OpenCV's INTER_CUBIC samples without widening the kernel
    assert pillow["lr_psnr_vs_matlab"] > cubic["lr_psnr_vs_matlab"] + 3
    assert all(r["baseline_psnr"] > 15 for r in rows.values())


def test_without_opencv_the_row_says_what_to_install(hr_images, monkeypatch):
    monkeypatch.setitem(sys.modules, "cv2", None)
    rows = resize_rows(hr_images[:1], 4)
    assert [r["way"] for r in rows] == ["MATLAB imresize (the protocol)", "Pillow BICUBIC", "OpenCV"]
    assert "opencv-python-headless" in rows[-1]["note"] and rows[-1]["baseline_psnr"] is None
    assert "Not measured: OpenCV" in resize_verdict(rows, scale=4, published_gap_db=0.08)


def _resize_row(way, against, baseline):
    return {"way": way, "lr_psnr_vs_matlab": against, "baseline_psnr": baseline, "note": ""}


def test_resize_verdict_compares_the_baseline_spread_with_the_published_gap():
    rows = [
        _resize_row("MATLAB imresize (the protocol)", float("inf"), 26.0),
        _resize_row("a", 40.0, 25.9),
        _resize_row("b", 30.0, 25.5),
    ]
    text = resize_verdict(rows, scale=4, published_gap_db=0.08)
    assert "a 40.0 dB; b 30.0 dB" in text and "spans 0.50 dB, more than the 0.08 dB" in text
    close = resize_verdict(rows[:2], scale=4, published_gap_db=0.2)
    assert "spans 0.10 dB, less than the 0.20 dB" in close and "would not reorder" in close


def test_amp_and_allocator_verdicts_read_their_rows():
    text = amp_memory_verdict(
        [{"precision": "fp32", "peak_mib": 1000}, {"precision": "bf16", "peak_mib": 600}],
        claimed_before_gb=9.8,
        claimed_after_gb=5.2,
    )
    assert "fp32 1000 MiB" in text and "bf16 600 MiB (0.60x fp32)" in text and "(0.53x)" in text
    rows = [
        {"what": "start", "allocated_mib": 0, "reserved_mib": 0},
        {"what": "a 256 MiB tensor allocated", "allocated_mib": 256, "reserved_mib": 256},
        {"what": "after del", "allocated_mib": 0, "reserved_mib": 256},
        {"what": "after del, then empty_cache()", "allocated_mib": 0, "reserved_mib": 0},
        {"what": "8 forward passes, losses kept with their graphs", "allocated_mib": 90, "reserved_mib": 100},
        {"what": "8 forward passes, losses kept detached", "allocated_mib": 92, "reserved_mib": 100},
    ]
    text = allocator_verdict(rows)
    assert "del returned 256 MiB" in text and "changed by +0 MiB" in text and "gave 256 MiB back" in text
    assert "losses kept with their graphs: +90 MiB" in text and "losses kept detached: +92 MiB" in text
