"""What every lesson starts with: the profile in force, the device, seeds, one environment line, labels that say which
data and device a number comes from, and the notebook's own measured run time."""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass, field

import torch

from ..env import environment_report, format_environment_report, resolve_device, usable_cpu_count
from ..loadmeter import busy_cores, cpu_budget
from ..seeding import seed_everything
from ..step import native_precisions
from .data import DataSource
from .display import PARTS, parts_text
from .profiles import Profile, resolve_profile


def device_name(device: torch.device) -> str:
    """A short name for where a number was measured: the GPU's name, or the CPU with its core count."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.machine()}, {usable_cpu_count()} cores)"


def data_name(source: DataSource) -> str:
    """A short name for the data a number comes from; stand-ins say they are not the real dataset."""
    real = {"BSDS300": "BSD100 / BSDS300", "CIFAR-10": "CIFAR-10"}
    base = source.name.split(" stand-in")[0]
    return f"{base} stand-in, not {real.get(base, base)}" if source.is_standin else source.name


@dataclass
class Lesson:
    """A running lesson: its profile and device, and `tag` to label printed numbers and figure titles."""

    profile: Profile
    device: torch.device
    started: float = field(default_factory=time.perf_counter)
    said: set[tuple[str | None, str]] = field(default_factory=set)  # (data, device) pairs already named

    def tag(self, text: str, data: DataSource | str | None = None) -> str:
        """`text` labelled, the first time this notebook shows numbers from a data source (or a data set's name) on
        this device, with both; in smoke runs, always with a warning that it is not a measurement."""
        name = data if isinstance(data, str) else data_name(data) if data else None
        where = (name, device_name(self.device))
        if where in self.said:
            return self.profile.label(text)
        self.said.add(where)
        return self.profile.label(text, data=name, device=where[1])

    def finish(self) -> str:
        """The notebook's measured wall time against the runner's limit for this profile, then each announced part
        with the time announced and the time it took."""
        seconds = time.perf_counter() - self.started
        line = (
            f"this notebook ran {seconds:.0f} s on {device_name(self.device)} in the {self.profile.name} profile "
            f"(the course runner stops a notebook after {self.profile.notebook_limit_s} s)"
        )
        parts = parts_text()
        return f"{line}\n{parts}" if parts else line


def start_lesson(requested_profile: str = "auto", *, seed: int = 0) -> Lesson:
    """Resolve the profile and device, seed everything, print the environment in one line; return the Lesson."""
    profile = resolve_profile(requested_profile)
    device = resolve_device()
    PARTS.clear()  # a new lesson in this kernel times its own announced parts
    seed_everything(seed)
    print(f"profile {profile.name} ({profile.description})")
    print(
        format_environment_report(environment_report(device))
        + f" | native precisions: {', '.join(native_precisions(device))}"
    )
    print(set_lesson_threads())
    return Lesson(profile, device)


def set_lesson_threads(busy: int | None = None) -> str:
    """Set this process's intra-op threads to the cores other processes leave free (measured now unless `busy` is
    given), never more than torch's default; return the line saying so."""
    cores = usable_cpu_count()
    busy = busy_cores() if busy is None else busy
    threads = min(torch.get_num_threads(), cpu_budget(0, cores, busy)[1])
    torch.set_num_threads(threads)
    line = f"CPU budget: {threads} intra-op thread{'s' * (threads != 1)} on {cores} usable cores"
    if busy:
        line += (
            f"; other processes kept {busy} of them busy as the lesson started, so the step's threads keep off "
            f"{'it' if busy == 1 else 'them'} (a thread sharing a core with a busy process waits for it at every "
            "operator); DataLoader workers are budgeted where a lesson starts them"
        )
    return line
