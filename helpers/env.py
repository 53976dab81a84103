"""The machine: which device to use, how many cores and how much memory there are, and a one-line environment report.

Example:
    >>> resolve_device("cpu"), usable_cpu_count() >= 1
    (device(type='cpu'), True)
    >>> report = environment_report(torch.device("cpu"))  # print(format_environment_report(report)): one line
    >>> report["device"], report["cpu_cores"] == usable_cpu_count()
    ('cpu', True)

Copy alone.
Needs: torch.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from typing import Any

import torch


def resolve_device(requested: str | torch.device | None = None) -> torch.device:
    """Return `requested` as a torch.device, or CUDA when available, else CPU."""
    if requested is not None and str(requested) != "auto":
        device = torch.device(requested)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"device {requested!r} was requested but CUDA is not available on this machine")
        return device
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def usable_cpu_count() -> int:
    """Return the number of CPU cores this process may run on (affinity-aware)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def total_memory_bytes() -> int | None:
    """Return the machine's physical memory in bytes, or None when it cannot be read."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _version_of(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def environment_report(device: torch.device | None = None) -> dict[str, Any]:
    """Return versions (Python, torch, torchvision, kornia), the device, its CUDA capability, cores and memory."""
    device = device or resolve_device()
    memory = total_memory_bytes()
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "torch": torch.__version__,
        "torchvision": _version_of("torchvision"),
        "kornia": _version_of("kornia"),
        "device": str(device),
        "cpu_cores": usable_cpu_count(),
        "memory_gib": round(memory / 2**30, 1) if memory else None,
        "torch_threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        with torch.cuda.device(device):  # is_bf16_supported asks about the current device
            # without emulation: a T4 (7.5) runs bf16 only emulated, slower than fp16, and reports it "supported"
            bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
        report.update(
            device_name=props.name,
            cuda_capability=f"{props.major}.{props.minor}",
            device_memory_gib=round(props.total_memory / 2**30, 1),
            cuda_version=torch.version.cuda,
            bf16_supported=bf16,
        )
    else:
        report.update(device_name=platform.processor() or platform.machine(), cuda_capability=None)
    return report


def format_environment_report(report: dict[str, Any]) -> str:
    """Render an environment report as one readable line."""
    parts = [
        f"torch {report['torch']}",
        f"torchvision {report['torchvision']}",
        f"kornia {report['kornia']}",
        f"device {report['device']} ({report['device_name']}",
    ]
    if report.get("cuda_capability"):
        parts[-1] += f", capability {report['cuda_capability']}, {report['device_memory_gib']} GiB"
    parts[-1] += ")"
    parts.append(f"{report['cpu_cores']} CPU cores")
    if report.get("memory_gib"):
        parts.append(f"{report['memory_gib']} GiB RAM")
    parts.append(f"Python {report['python']}")
    return " | ".join(parts)
