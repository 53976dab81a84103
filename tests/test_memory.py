"""The CPU memory probes read the right /proc lines, in bytes: MemAvailable (not MemFree) and VmHWM."""

from __future__ import annotations

import sys

import pytest
import torch

from helpers.memory import free_memory_bytes, peak_rss_bytes


def _kib(path: str, key: str) -> int:
    with open(path) as f:
        return next(int(line.split()[1]) for line in f if line.startswith(f"{key}:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_free_memory_on_a_cpu_is_mem_available_in_bytes():
    # MemAvailable moves while other processes run: within 64 MiB of a read just after
    assert abs(free_memory_bytes(torch.device("cpu")) - _kib("/proc/meminfo", "MemAvailable") * 1024) < 2**26


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_the_peak_resident_size_is_vm_hwm_in_bytes():
    big = torch.ones(2**26)  # 256 MiB touched, then returned to the system: the peak stays above the current size
    del big
    assert peak_rss_bytes() - _kib("/proc/self/status", "VmRSS") * 1024 > 2**27
    assert peak_rss_bytes() == pytest.approx(_kib("/proc/self/status", "VmHWM") * 1024, abs=2**24)


@pytest.mark.parametrize(("platform", "factor"), [("linux", 1024), ("darwin", 1)])
def test_the_fallback_peak_reads_ru_maxrss_in_the_platforms_unit(monkeypatch, platform, factor):
    import types

    from helpers import memory

    monkeypatch.setattr(memory, "_proc_bytes", lambda path, key: None)  # no /proc: the getrusage fallback
    monkeypatch.setattr(memory.sys, "platform", platform)
    usage = types.SimpleNamespace(ru_maxrss=5000)
    monkeypatch.setattr(memory, "resource", types.SimpleNamespace(RUSAGE_SELF=0, getrusage=lambda who: usage))
    assert memory.peak_rss_bytes() == 5000 * factor  # KiB on Linux and the BSDs, bytes on macOS
