"""Fixtures for the CUDA tests: the device, exact fp32 arithmetic (TF32 off) for equivalence checks, the course's
JPEGs. Every test in this folder is marked `cuda` (tests/conftest.py skips them, with the reason, without a GPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.course.data import bsds300_split, data_root, prepare_bsds300
from helpers.course.standins import skimage_photo  # skimage.data's pixels without SciPy, which the GPU check lacks


@pytest.fixture
def cuda() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device())


@pytest.fixture
def exact_fp32():
    """TF32 off while a test compares CUDA fp32 results with a reference (TF32 keeps only 10 mantissa bits)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture(scope="session")
def course_jpegs(tmp_path_factory) -> list[Path]:
    """The JPEGs the course decodes: the BSDS300 stand-in written here, plus real BSDS300 test images if prepared."""
    standin = prepare_bsds300(tmp_path_factory.mktemp("bsds"), offline=True, progress=False)
    paths = bsds300_split(standin.root, "test") + bsds300_split(standin.root, "train")[:8]
    real = data_root() / "BSDS300"
    if real.is_dir():
        paths += bsds300_split(real, "test")[:16]
    return paths


@pytest.fixture(scope="session")
def distinct_photos(tmp_path_factory) -> Path:
    """Four PNGs cut from four different photographs, so a crop is found in exactly one image at one place."""
    folder = tmp_path_factory.mktemp("distinct")
    for name in ("astronaut", "coffee", "chelsea", "rocket"):
        photo = np.ascontiguousarray(skimage_photo(name)[:300, :400])
        Image.fromarray(photo).save(folder / f"{name}.png")
    return folder
