"""The course's training recipes on CUDA (smoke sizes): the SR run takes its crops from the zero-CPU device loader,
the CIFAR run keeps the whole dataset on the GPU; both train with a measured precision and evaluate on the GPU."""

from __future__ import annotations

import pytest
import torch

from helpers.course.recipe_run import run_recipe
from helpers.course.recipes import cifar_recipe, sr_recipe
from helpers.loading import DeviceTensorLoader
from helpers.sr_cache import DeviceSRCropLoader
from helpers.step import native_precisions

pytestmark = pytest.mark.cuda


@pytest.fixture
def offline_data(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    # a recipe turns cudnn.benchmark on for its fixed shapes (process-wide): not for the tests after this one
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", torch.backends.cudnn.benchmark)
    return tmp_path


def test_sr_recipe_on_cuda_uses_the_zero_cpu_loader(offline_data, cuda):
    recipe = sr_recipe("smoke", cuda)
    assert isinstance(recipe.loader, DeviceSRCropLoader) and recipe.loader.store.device == cuda
    assert recipe.precision.precision in native_precisions(cuda)
    history = run_recipe(recipe, checkpoint_dir=offline_data / "sr", progress=False)
    last = history[-1]
    assert len(history) == recipe.epochs and last["optimizer_steps"] >= 1  # fp16 may skip a step or two, not all
    assert last["optimizer_steps"] + last["skipped_steps"] == last["micro_batches"]
    assert torch.isfinite(torch.tensor([last["train_loss"], last["psnr_y"], last["bicubic_psnr_y"]])).all()
    assert (offline_data / "sr" / "last.pt").is_file()


def test_cifar_recipe_on_cuda_keeps_the_dataset_on_the_gpu(offline_data, cuda):
    recipe = cifar_recipe("smoke", cuda)
    assert torch.backends.cudnn.benchmark  # 32-px batches of one shape
    assert isinstance(recipe.loader, DeviceTensorLoader) and recipe.loader.images.device == cuda
    history = run_recipe(recipe, checkpoint_dir=offline_data / "cifar", progress=False)
    assert len(history) == recipe.epochs and 0 <= history[-1]["top1"] <= 1
