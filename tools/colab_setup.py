"""Make this course runnable in a running Python (Colab, or any Jupyter where it is not set up) without touching what
that Python already has: `helpers` importable in the same process, no runtime restart.

Every notebook's setup cell finds (or clones) the repository, then runs this file with `runpy` and calls
`setup_course(root)`. Nothing of the course is pip-installed: the notebooks import `helpers` and `helpers.course`
from the checkout, as `make course` and `make test` do. Steps, each printed on one line with its time:
1. the course's dependencies, read from the checkout's pyproject.toml (its base list and its `course` extra: what
   the notebooks import, kornia, matplotlib, scikit-image, ...), that `importlib.metadata` says are missing,
   installed with a constraints file that pins every distribution already installed, so pip can add packages but
   never upgrade or downgrade torch, torchvision, numpy, ipykernel or anything else the runtime provides;
2. the checkout's root put first on `sys.path` (this kernel) and on `PYTHONPATH` (the processes it starts, such as
   `python -m helpers.course.train` under torchrun).
pip's own output is captured; on failure the tail of it is shown with the command to run by hand.
Standard library only (and pip's own TOML reader on Python 3.10): it runs before anything of the course is importable.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the TOML reader pip itself uses
    from pip._vendor import tomli as tomllib

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


def _project(root: Path) -> dict:
    """The [project] table of the checkout's pyproject.toml."""
    pyproject = Path(root) / "pyproject.toml"
    try:
        with open(pyproject, "rb") as f:
            return tomllib.load(f)["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as error:
        raise RuntimeError(f"course setup: cannot read the course's dependencies from {pyproject}: {error}") from error


def base_requirements(root: Path) -> list[str]:
    """The course's base requirements (the library's), as pyproject.toml at `root` lists them."""
    return list(_project(root).get("dependencies", []))


def extra_requirements(extra: str, root: Path) -> list[str]:
    """The requirements of the optional dependency group `extra`, as pyproject.toml at `root` lists them."""
    extras = _project(root).get("optional-dependencies", {})
    found = {canonical(name): requirements for name, requirements in extras.items()}
    if canonical(extra) not in found:
        raise RuntimeError(f"course setup: {Path(root) / 'pyproject.toml'} declares no extra {extra!r}")
    return list(found[canonical(extra)])


def course_requirements(root: Path) -> list[str]:
    """What the notebooks need: the base requirements (the library) and the `course` extra, each name once."""
    requirements, seen = [], set()
    for requirement in base_requirements(root) + extra_requirements("course", root):
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
    """Install whatever of the course's dependencies this Python lacks (nothing it has changes); return the lines
    printed."""
    runner = runner or _run
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        print(f"course setup: {line}", flush=True)

    before = installed_versions()
    requirements = course_requirements(root)
    missing = missing_requirements(requirements, before)
    kept = [r for r in requirements if r not in missing]
    if kept:
        found = ", ".join(f"{requirement_name(r)} {before[canonical(requirement_name(r))]}" for r in kept)
        say(f"kept as this Python has them: {found}")
    if not missing:
        say("nothing else to install")
        return lines
    folder = Path(tempfile.mkdtemp(prefix="course-setup-"))
    constraints = folder / "keep-installed.txt"
    constraints.write_text(constraints_text(before), encoding="utf-8")
    names = ", ".join(requirement_name(r) for r in missing)
    seconds = _pip(runner, ["-c", str(constraints), *missing], names)  # on failure the file stays: its command names it
    shutil.rmtree(folder, ignore_errors=True)
    importlib.invalidate_caches()
    added = len(installed_versions().keys() - before.keys())
    say(f"installed {names} ({added} packages with what they need; nothing already here changed) in {seconds:.1f} s")
    return lines


def put_on_path(root: Path) -> None:
    """Make `helpers` at `root` importable here (sys.path) and in the processes this one starts (PYTHONPATH)."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(root) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(root), *paths])
    importlib.invalidate_caches()


def setup_course(root: str | Path) -> None:
    """Install what the course at `root` needs into this Python and make `helpers` importable, without a restart."""
    root = Path(root).resolve()
    if not (root / "helpers" / "__init__.py").is_file():
        raise RuntimeError(f"course setup: {root} is not the course repository (no helpers/__init__.py in it)")
    start = time.perf_counter()
    install_course(root)
    put_on_path(root)
    print(f"course setup: ready in {time.perf_counter() - start:.1f} s; helpers imports from {root}", flush=True)
