"""The recipes: sizes given to a recipe replace the profile's, and fixed shapes turn cudnn.benchmark on only on CUDA.
(Training them from the command line: test_recipe_run.py.)"""

from __future__ import annotations

import pytest
import torch

from helpers.course.profiles import resolve_profile


@pytest.mark.parametrize("task", ["sr", "cifar"])
def test_a_recipe_takes_sizes_that_replace_the_profiles(tmp_path, monkeypatch, task):
    import dataclasses

    from helpers.course import recipes as recipes_module
    from helpers.course.recipes import cifar_recipe, sr_recipe

    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    profile_sizes = getattr(resolve_profile("smoke"), task)
    sizes = dataclasses.replace(profile_sizes, steps=profile_sizes.steps + 2, batch=profile_sizes.batch // 2)
    build = sr_recipe if task == "sr" else cifar_recipe
    asked: list[torch.device] = []
    monkeypatch.setattr(recipes_module, "benchmark_fixed_shapes", asked.append)
    recipe = build("smoke", torch.device("cpu"), sizes=sizes)
    assert asked == [torch.device("cpu")]  # fixed shapes: cudnn.benchmark on where the device is CUDA
    assert recipe.steps == sizes.steps and recipe.config["sizes"] == dataclasses.asdict(sizes)
    assert next(iter(recipe.loader))[0].shape[0] == sizes.batch
    assert build("smoke", torch.device("cpu")).steps == profile_sizes.steps  # without `sizes`: the profile's


def test_fixed_shapes_turn_cudnn_benchmark_on_only_on_cuda(monkeypatch):
    from helpers.course.recipes import benchmark_fixed_shapes

    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    benchmark_fixed_shapes(torch.device("cpu"))
    assert torch.backends.cudnn.benchmark is False
    benchmark_fixed_shapes(torch.device("cuda", 0))
    assert torch.backends.cudnn.benchmark is True
