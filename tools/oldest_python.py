"""CI's check of the oldest Python the course declares: every module, tool, test and notebook cell loads there.

`.ci/run` runs it. The floor is pyproject.toml's `requires-python`; the stack for it is constraints/lower-bounds.txt
(tests/tools/test_versions.py keeps the two equal). It keeps a venv with that stack's pins and the course's declared
dependencies (not the course itself: the checkout under test is put on PYTHONPATH) in a cache folder, rebuilt only
when the constraints or the declared dependencies change, and in it:

1. imports every module of `helpers/` (the course layer included) and every `tools/*.py` (none runs its `main`);
2. collects every test (`pytest --collect-only`, which imports each test module and conftest);
3. compiles every notebook code cell with that Python's compiler (syntax only: what a cell imports is step 1's).

A 3.11-only name used at import time anywhere (`import tomllib` unguarded, `from typing import Self`) fails step 1
or 2 with the file named; a 3.11-only syntax in a notebook fails step 3. What runs only inside a function body is left
to the unit tests: `--unit-tests` runs them there too (about 8 min on 2 cores; the weekly `versions` workflow runs
them with nbval).

    python tools/oldest_python.py [--cache DIR] [--unit-tests]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import versions  # noqa: E402 (the sibling tool: stacks, pins, finding a Python)

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as `tomli` (pytest brings it there)
    import tomli as tomllib

REPO = versions.REPO
STACK = "lower-bounds"
EXTRAS = ("course", "jupyter", "test")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "feeding-the-gpu" / "venvs"

# Run inside the old Python, with the checkout first on sys.path: import everything, report each failure by file.
_IMPORT_ALL = r"""
import importlib, importlib.util, pkgutil, sys, traceback
from pathlib import Path
repo = Path(sys.argv[1])
failed = []
import helpers
names = ["helpers"] + [m.name for m in pkgutil.walk_packages(helpers.__path__, "helpers.")]
for name in names:
    try:
        importlib.import_module(name)
    except BaseException as error:
        failed.append((name, traceback.format_exception_only(type(error), error)[-1].strip()))
sys.path.insert(0, str(repo / "tools"))
tools = sorted((repo / "tools").glob("*.py"))
for path in tools:
    try:
        spec = importlib.util.spec_from_file_location(f"_tool_{path.stem}", path)
        module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up there
        spec.loader.exec_module(module)
    except BaseException as error:
        failed.append((f"tools/{path.name}", traceback.format_exception_only(type(error), error)[-1].strip()))
for name, why in failed:
    print(f"cannot import {name}: {why}")
print(f"imported {len(names) + len(tools) - len(failed)} of {len(names) + len(tools)} modules and tools")
sys.exit(1 if failed else 0)
"""

_COMPILE_CELLS = r"""
import json, sys
from pathlib import Path
failed = 0
cells = 0
for path in sorted(Path(sys.argv[1], "notebooks").glob("*.ipynb")):
    for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] != "code":
            continue
        cells += 1
        lines = "".join(cell["source"]).splitlines()
        source = "\n".join("pass  # " + l if l.lstrip().startswith(("%", "!")) else l for l in lines)
        try:
            compile(source, f"{path.name} cell {index}", "exec")
        except SyntaxError as error:
            failed += 1
            print(f"{path.name} cell {index} does not compile on Python {sys.version.split()[0]}: {error}")
print(f"compiled {cells - failed} of {cells} notebook code cells")
sys.exit(1 if failed else 0)
"""


def declared_requirements(pyproject: Path) -> list[str]:
    """The base dependencies and those of the extras the course runs with, as pyproject.toml declares them."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    extras = project.get("optional-dependencies", {})
    return [*project["dependencies"], *(r for extra in EXTRAS for r in extras.get(extra, []))]


def floor_version(pyproject: Path) -> str:
    """The `X.Y` of `requires-python = ">=X.Y"`."""
    declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["requires-python"]
    if not declared.startswith(">="):
        raise SystemExit(f"{pyproject}: requires-python is {declared!r}; this check reads a '>=X.Y' floor")
    return declared[2:].strip()


def venv_key(constraints: Path, requirements: list[str]) -> str:
    """What the cached venv was built from: the stack's pins and the declared dependencies (a change rebuilds it)."""
    text = constraints.read_text(encoding="utf-8") + "\n" + "\n".join(requirements)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_venv(python: str, venv: Path, constraints: Path, requirements: list[str], log: Path) -> str | None:
    """A fresh venv with the stack's pins, then the course's dependencies with the pins kept; None, or what failed."""
    shutil.rmtree(venv, ignore_errors=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
    for command, failure in [
        ([python, "-m", "venv", str(venv)], f"could not make a venv with {python}"),
        ([*pip, "-r", str(constraints)], f"pip could not install {constraints.name}"),
        (
            [*pip, "-c", str(constraints), *requirements],
            f"pip could not install the dependencies with {constraints.name}",
        ),
    ]:
        with log.open("a", encoding="utf-8") as out:
            out.write(f"\n$ {' '.join(command)}\n")
            out.flush()
            if subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode:
                return f"{failure} (see {log})"
    moved = versions.pin_problems(venv, constraints)
    return f"the dependencies moved pinned versions: {', '.join(moved)}" if moved else None


def main(argv: list[str] | None = None) -> int:
    """Command line: build or reuse the floor's venv, then import, collect and compile everything there."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=CACHE, help=f"where the venv is kept (default {CACHE})")
    parser.add_argument("--unit-tests", action="store_true", help="also run the unit tests there (minutes)")
    args = parser.parse_args(argv)
    pyproject, constraints = REPO / "pyproject.toml", versions.CONSTRAINTS / versions.STACKS[STACK]
    floor = floor_version(pyproject)
    if versions.stack_python_version(constraints) != floor:
        print(f"oldest-python: {constraints.name} is for Python {versions.stack_python_version(constraints)} but "
              f"requires-python says >={floor}: move the stack with the floor")  # fmt: skip
        return 1
    python = versions.find_python(floor)
    if python is None:
        print(f"oldest-python: no Python {floor} here: install it (pyenv install {floor}) or set "
              f"PYTHON_{floor.replace('.', '_')}; CI checks the oldest Python the course declares")  # fmt: skip
        return 1
    requirements = declared_requirements(pyproject)
    venv = args.cache / f"py{floor}-{STACK}-{venv_key(constraints, requirements)}"
    log = args.cache / f"{venv.name}.log"
    args.cache.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    ready = venv / ".complete"
    if not ready.exists():
        print(f"oldest-python: building {venv} (Python {floor}, {constraints.name}); log: {log}", flush=True)
        log.write_text("", encoding="utf-8")
        failure = build_venv(python, venv, constraints, requirements, log)
        if failure is not None:
            print(f"oldest-python: FAILED to build the venv: {failure}")
            return 1
        ready.write_text(json.dumps({"python": python, "requirements": requirements}), encoding="utf-8")
    built_s = time.perf_counter() - start
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "COURSE_"))}
    env.update(PYTHONPATH=str(REPO), COURSE_PROFILE="smoke", COURSE_OFFLINE="1", MPLBACKEND="Agg")
    interpreter = str(venv / "bin" / "python")
    steps = [
        ("import", [interpreter, "-c", _IMPORT_ALL, str(REPO)]),
        ("collect", [interpreter, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"]),
        ("compile", [interpreter, "-c", _COMPILE_CELLS, str(REPO)]),
    ]
    if args.unit_tests:
        steps.append(("unit tests", [interpreter, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]))
    failed = []
    for name, command in steps:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
        lines = (done.stdout + done.stderr).strip().splitlines()
        if done.returncode:
            failed.append(name)
            print(f"oldest-python {name}: FAILED (exit {done.returncode})\n" + "\n".join(lines[-40:]))
        else:
            print(f"oldest-python {name}: {lines[-1] if lines else 'ok'}")
    total_s = time.perf_counter() - start
    versions_now = versions.versions_line(venv)
    print(f"oldest-python ({versions_now}): {'FAILED: ' + ', '.join(failed) if failed else 'ok'}; "
          f"venv {'built' if built_s > 5 else 'reused'} in {built_s:.0f} s, {total_s:.0f} s in all")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
