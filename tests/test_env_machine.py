"""env.py reads the machine as this process sees it: "auto" is the default device, the cores are the affinity's, and
memory is reported in GiB."""

from __future__ import annotations

import os

from helpers import env


def test_auto_is_the_default_device():
    assert env.resolve_device("auto") == env.resolve_device(None) == env.resolve_device()


def test_the_cores_are_the_ones_this_process_may_run_on(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(0, 74, 2)), raising=False)
    assert env.usable_cpu_count() == 37  # not os.cpu_count(): a container or taskset may allow fewer


def test_memory_is_reported_in_gib(monkeypatch):
    monkeypatch.setattr(env, "total_memory_bytes", lambda: 12 * 2**30)
    report = env.environment_report()
    assert report["memory_gib"] == 12.0
    assert "12.0 GiB RAM" in env.format_environment_report(report)


def test_the_report_line_names_every_library_version():
    report = env.environment_report()
    line = env.format_environment_report(report)
    for name in ("torch", "torchvision", "kornia"):
        assert f"{name} {report[name]}" in line
