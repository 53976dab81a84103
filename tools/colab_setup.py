"""Install this course into a running Python (Colab, or any Jupyter where it is not installed) without touching
what that Python already has, and make `helpers` importable in the same process: no runtime restart.

Every notebook's setup cell finds (or clones) the repository, then runs this file with `runpy` and calls
`setup_course(root)`. Steps, each printed on one line with its time:
1. the course package itself, `pip install --no-deps -e ROOT` (so `python -m helpers...` works in subprocesses too);
2. its base dependencies and its `course` extra (what the notebooks import: kornia, matplotlib, scikit-image, ...)
   that `importlib.metadata` says are missing, installed with a constraints file that pins every distribution already installed, so pip can add packages but never upgrade or
   downgrade torch, torchvision, numpy, ipykernel or anything else the runtime provides.
pip's own output is captured; on failure the tail of it is shown with the command to run by hand.
Standard library only: it runs before anything of the course is importable.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

DISTRIBUTION = "feeding-the-gpu"
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_PLAIN_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+!_-]*$")

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _run(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), capture_output=True, text=True, check=False)


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): lower case, runs of -_. as one dash."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The distribution name at the start of a requirement string such as `kornia>=0.7.3; python_version>'3'`."""
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f"cannot read a package name from the requirement {requirement!r}")
    return match.group(1)


def base_requirements(distribution: str = DISTRIBUTION) -> list[str]:
    """The installed course's requirements that no extra asks for (its base list, as in pyproject.toml)."""
    requires = importlib.metadata.requires(distribution) or []
    return [r for r in requires if "extra ==" not in r.replace('"', "").replace("'", "")]


_EXTRA_CLAUSE = re.compile(r"""\s*(and\s+)?extra\s*==\s*['"]?([A-Za-z0-9._-]+)['"]?\s*(and\s+)?""")


def extra_requirements(extra: str, distribution: str = DISTRIBUTION) -> list[str]:
    """The installed course's requirements for `extra`, written without their `extra == ...` marker clause."""
    found = []
    for requirement in importlib.metadata.requires(distribution) or []:
        text, _, marker = requirement.partition(";")
        clause = _EXTRA_CLAUSE.search(marker)
        if clause is None or canonical(clause.group(2)) != canonical(extra):
            continue
        rest = _EXTRA_CLAUSE.sub(" ", marker, count=1).strip().strip("()").strip()
        found.append(f"{text.strip()}; {rest}" if rest else text.strip())
    return found


def course_requirements(distribution: str = DISTRIBUTION) -> list[str]:
    """What the notebooks need: the base requirements (the library) and the `course` extra, each name once."""
    requirements, seen = [], set()
    for requirement in base_requirements(distribution) + extra_requirements("course", distribution):
        if canonical(requirement_name(requirement)) not in seen:
            seen.add(canonical(requirement_name(requirement)))
            requirements.append(requirement)
    return requirements


def installed_versions() -> dict[str, str]:
    """Every distribution this Python can import, canonical name -> version (the first one on sys.path wins)."""
    versions: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata is not None else None
        if name and dist.version and canonical(name) not in versions:
            versions[canonical(name)] = dist.version
    return versions


def missing_requirements(requirements: Sequence[str], installed: dict[str, str]) -> list[str]:
    """The requirements whose package is not installed at all (one already installed is kept, whatever its version)."""
    return [r for r in requirements if canonical(requirement_name(r)) not in installed]


def constraints_text(installed: dict[str, str]) -> str:
    """A pip constraints file that pins every installed distribution to the version it has now."""
    lines = [f"{name}=={version}" for name, version in sorted(installed.items()) if _PLAIN_VERSION.match(version)]
    return "\n".join(lines) + "\n"


def _pip(runner: Runner, arguments: list[str], what: str) -> float:
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *arguments]
    start = time.perf_counter()
    result = runner(command)
    if result.returncode != 0:
        tail = "\n".join(((result.stdout or "") + (result.stderr or "")).strip().splitlines()[-25:])
        raise RuntimeError(
            f"course setup: installing {what} failed (pip exit code {result.returncode}). The end of pip's output:\n"
            f"{tail}\n\nTo see all of it, run this in a terminal (or in a cell, after a '!'):\n  {shlex.join(command)}"
        )
    return time.perf_counter() - start


def install_course(root: Path, *, runner: Runner | None = None) -> list[str]:
    """Install the course at `root` and whatever of its notebooks' dependencies is missing; return the lines printed."""
    runner = runner or _run
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        print(f"course setup: {line}", flush=True)

    seconds = _pip(runner, ["--no-deps", "-e", str(root)], f"the course package from {root}")
    importlib.invalidate_caches()
    say(f"installed the course package from {root} (editable, no dependencies) in {seconds:.1f} s")
    before = installed_versions()
    requirements = course_requirements()
    missing = missing_requirements(requirements, before)
    kept = [r for r in requirements if r not in missing]
    if kept:
        found = ", ".join(f"{requirement_name(r)} {before[canonical(requirement_name(r))]}" for r in kept)
        say(f"kept as this Python has them: {found}")
    if not missing:
        say("nothing else to install")
        return lines
    with tempfile.TemporaryDirectory() as folder:
        constraints = Path(folder) / "keep-installed.txt"
        constraints.write_text(constraints_text(before), encoding="utf-8")
        names = ", ".join(requirement_name(r) for r in missing)
        seconds = _pip(runner, ["-c", str(constraints), *missing], names)
    importlib.invalidate_caches()
    added = len(installed_versions().keys() - before.keys())
    say(f"installed {names} ({added} packages with what they need; nothing already here changed) in {seconds:.1f} s")
    return lines


def setup_course(root: str | Path) -> None:
    """Install the course at `root` into this Python and make `helpers` importable here, without a restart."""
    root = Path(root).resolve()
    if not (root / "helpers" / "__init__.py").is_file():
        raise RuntimeError(f"course setup: {root} is not the course repository (no helpers/__init__.py in it)")
    start = time.perf_counter()
    install_course(root)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))  # the editable install's .pth is read only when a Python starts
    importlib.invalidate_caches()
    print(f"course setup: ready in {time.perf_counter() - start:.1f} s; helpers imports from {root}", flush=True)
