"""Device and profile resolution, seeding, and the environment report."""

from __future__ import annotations

import os
import random

import pytest
import torch

from helpers import env
from helpers.course.profiles import PROFILE_ENV_VAR, resolve_profile, resolve_profile_name
from helpers.env import environment_report, format_environment_report, resolve_device
from helpers.seeding import seed_everything


def test_auto_profile_follows_the_device(monkeypatch):
    monkeypatch.delenv(PROFILE_ENV_VAR, raising=False)
    assert resolve_profile_name("auto", cuda_available=True) == "full"
    assert resolve_profile_name("auto", cuda_available=False) == "cpu"
    assert resolve_profile_name("smoke", cuda_available=True) == "smoke"


def test_environment_variable_overrides_the_argument(monkeypatch):
    monkeypatch.setenv(PROFILE_ENV_VAR, "smoke")
    assert resolve_profile("full").name == "smoke"
    assert resolve_profile("auto").is_smoke


def test_unknown_profile_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(PROFILE_ENV_VAR, "huge")
    with pytest.raises(ValueError, match="'huge'.*COURSE_PROFILE.*smoke, cpu, full"):
        resolve_profile()


def test_smoke_numbers_are_labelled(monkeypatch):
    monkeypatch.delenv(PROFILE_ENV_VAR, raising=False)
    assert "smoke run" in resolve_profile("smoke").label("12 img/s")
    assert resolve_profile("cpu").label("12 img/s") == "12 img/s"


def test_device_resolution():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device().type == expected
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            resolve_device("cuda")


def test_seeding_repeats_every_generator():
    seed_everything(3)
    first = (random.random(), torch.rand(3))
    seed_everything(3)
    second = (random.random(), torch.rand(3))
    assert first[0] == second[0] and torch.equal(first[1], second[1])


def test_environment_report_names_versions_device_and_machine():
    report = environment_report(torch.device("cpu"))
    for key in ("torch", "torchvision", "kornia", "device", "device_name", "cpu_cores", "memory_gib"):
        assert key in report
    assert report["cpu_cores"] >= 1 and report["kornia"] != "not installed"
    line = format_environment_report(report)
    assert f"torch {torch.__version__}" in line and "CPU cores" in line


@pytest.mark.parametrize(("major", "native"), [(7, False), (8, True)])
def test_the_report_counts_bf16_only_where_it_is_not_emulated(monkeypatch, major, native):
    """A T4 (7.5) runs bf16 by emulation and torch.cuda.is_bf16_supported() says True there by default: the report
    asks without emulation, so it says False and 03's choice and the report agree (fp16 there)."""
    import contextlib
    import types

    asked: list[bool] = []

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        asked.append(including_emulation)
        return major >= 8 or including_emulation

    properties = types.SimpleNamespace(name="a GPU", major=major, minor=5, total_memory=16 * 2**30)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: properties)
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    report = environment_report(torch.device("cuda", 0))
    assert report["bf16_supported"] is native and asked == [False]


class TestTheMachineAsThisProcessSeesIt:
    """env.py reads the machine as this process sees it: "auto" is the default device, the cores are the affinity's, and
    memory is reported in GiB."""

    def test_auto_is_the_default_device(self):
        assert env.resolve_device("auto") == env.resolve_device(None) == env.resolve_device()

    def test_the_cores_are_the_ones_this_process_may_run_on(self, monkeypatch):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(0, 74, 2)), raising=False)
        assert env.usable_cpu_count() == 37  # not os.cpu_count(): a container or taskset may allow fewer

    def test_memory_is_reported_in_gib(self, monkeypatch):
        monkeypatch.setattr(env, "total_memory_bytes", lambda: 12 * 2**30)
        report = env.environment_report()
        assert report["memory_gib"] == 12.0
        assert "12.0 GiB RAM" in env.format_environment_report(report)

    def test_the_report_line_names_every_library_version(self):
        report = env.environment_report()
        line = env.format_environment_report(report)
        for name in ("torch", "torchvision", "kornia"):
            assert f"{name} {report[name]}" in line
