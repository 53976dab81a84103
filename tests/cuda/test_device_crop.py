"""The JPEG-folder pieces on CUDA: batched decoding onto the device matches the CPU within two levels, and the
per-sample RandomResizedCrop batch gives the CPU's result for the same boxes."""

from __future__ import annotations

import pytest
import torch
from torchvision.io import read_file

from helpers.device_crop import IMAGENET_MEAN, IMAGENET_STD, crop_boxes, decode_jpegs, device_train_augment

pytestmark = pytest.mark.cuda

MEAN_LEVELS = 2.0  # libjpeg-turbo against nvJPEG, as in test_decode.py


def test_batched_decoding_lands_on_the_device_and_matches_the_cpu(course_jpegs, cuda):
    encoded = [read_file(str(path)) for path in course_jpegs]
    on_gpu, on_cpu = decode_jpegs(encoded, cuda), decode_jpegs(encoded, "cpu")
    for gpu_image, cpu_image in zip(on_gpu, on_cpu):
        assert gpu_image.device == cuda and gpu_image.shape == cpu_image.shape
        assert float((gpu_image.cpu().float() - cpu_image.float()).abs().mean()) < MEAN_LEVELS
    batch = device_train_augment(64, mean=IMAGENET_MEAN, std=IMAGENET_STD).to(cuda)(on_gpu)
    assert batch.device == cuda and batch.shape == (len(encoded), 3, 64, 64)
    assert batch.is_contiguous(memory_format=torch.channels_last) and bool(torch.isfinite(batch).all())


def test_the_crop_kernel_matches_the_cpu(cuda, exact_fp32):
    images = torch.rand(4, 3, 80, 96)
    boxes = torch.tensor([[0, 0, 96, 80], [10, 5, 60, 70], [40, 20, 90, 50], [3, 3, 35, 35]], dtype=torch.float32)
    on_cpu = crop_boxes(images, boxes, 32)
    on_gpu = crop_boxes(images.to(cuda), boxes.to(cuda), 32)
    assert torch.allclose(on_gpu.cpu(), on_cpu, atol=1e-5)
