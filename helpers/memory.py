"""Memory readings for measurements: this process's peak and current resident set size, the device's peak and
current allocation, and the memory free for new tensors.

Example:
    >>> cpu = torch.device("cpu")
    >>> peak_device_memory_bytes(cpu), allocated_device_memory_bytes(cpu)  # the CUDA allocator's counters
    (None, None)
    >>> rss, peak = current_rss_bytes(), peak_rss_bytes()  # bytes (None where the system does not say)
    >>> rss is None or peak >= rss
    True

Copy alone.
Needs: torch.
"""

from __future__ import annotations

import sys

import torch

try:
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set size (Linux: /proc/self/clear_refs); False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _proc_bytes(path: str, key: str) -> int | None:
    """The `key:` line of a Linux /proc file that counts kB (VmRSS, MemAvailable, ...), in bytes; None where absent."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(f"{key}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss_bytes() -> int | None:
    """This process's peak resident set size since start or the last reset, in bytes (None where unknown)."""
    peak = _proc_bytes("/proc/self/status", "VmHWM")
    if peak is not None:
        return peak
    if resource is None:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS reports bytes, Linux and the BSDs KiB


def reset_peak_device_memory(device: torch.device) -> None:
    """Reset CUDA's peak-allocation counter (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_device_memory_bytes(device: torch.device) -> int | None:
    """Peak bytes allocated on a CUDA device since the last reset (None on CPU)."""
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def allocated_device_memory_bytes(device: torch.device) -> int | None:
    """Bytes the tensors on a CUDA device hold now (None on CPU)."""
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else None


def current_rss_bytes() -> int | None:
    """This process's resident set size now, in bytes (None where unknown)."""
    return _proc_bytes("/proc/self/status", "VmRSS")


def free_memory_bytes(device: torch.device) -> int | None:
    """Memory free for new tensors: the CUDA device's free bytes, or the machine's available RAM (Linux) on a CPU."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return _proc_bytes("/proc/meminfo", "MemAvailable")
