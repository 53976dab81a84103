"""JPEG decoding on the GPU (torchvision's nvJPEG path, as notebook 07 and the decode benchmark use it) against the
CPU decoder on the course's JPEGs."""

from __future__ import annotations

import pytest
import torch
from torchvision.io import decode_jpeg, read_file

from helpers.course.decoders import jpeg_decode_benchmark

pytestmark = pytest.mark.cuda

# JPEG leaves the IDCT and chroma upsampling to the decoder: libjpeg-turbo and nvJPEG differ by a level or so on
# average (more at sharp colour edges). The bound is torchvision's own for this comparison (test_image.py: mean
# absolute difference below 2 levels); a wrong channel order or a shifted image is tens of levels off.
MEAN_LEVELS = 2.0


def test_decode_jpeg_on_the_gpu_matches_the_cpu_within_two_levels(course_jpegs, cuda):
    encoded = [read_file(str(path)) for path in course_jpegs]
    on_cpu = decode_jpeg(encoded)
    on_gpu = decode_jpeg(encoded, device=cuda)  # one batched call, as the benchmark makes it
    assert len(on_gpu) == len(course_jpegs) >= 8
    for path, cpu_image, gpu_image in zip(course_jpegs, on_cpu, on_gpu):
        assert gpu_image.device == cuda and gpu_image.dtype == torch.uint8 and gpu_image.shape == cpu_image.shape
        difference = (gpu_image.cpu().float() - cpu_image.float()).abs()
        assert float(difference.mean()) < MEAN_LEVELS, f"{path.name}: mean difference {float(difference.mean()):.2f}"


def test_the_decode_benchmark_times_nvjpeg_on_cuda(course_jpegs, cuda):
    rows = jpeg_decode_benchmark(course_jpegs[:8], cuda, repeats=1)
    by_name = {row["decoder"]: row for row in rows}
    gpu_rows = [row for name, row in by_name.items() if "nvJPEG" in name]
    assert len(gpu_rows) == 1 and gpu_rows[0]["images_per_s"] > 0
    assert all(row["images_per_s"] > 0 for name, row in by_name.items() if "CPU" in name)
