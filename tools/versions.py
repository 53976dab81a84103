"""The versions readers have, tested: `make test-versions` runs this.

For each stack (a constraints file in constraints/, which names its Python in a `# python: X.Y` line) it builds a
fresh virtual environment, installs the stack's pinned versions and the course (`-e .[course,jupyter,test]`, the
pins kept), then runs what `make test` runs there: the unit tests, the library's docstring examples and nbval over
every notebook in the smoke profile, offline, with tools/nb_warnings.py failing any notebook cell whose output shows
a deprecation warning. One line per stack: `versions STACK (Python, torch, ...): pytest's summary; install and test
minutes`.

    python tools/versions.py [--stack NAME ...] [--venvs DIR] [--reuse] [-- extra pytest arguments]
    python tools/versions.py --check-pins CONSTRAINTS   this Python's packages against a stack's pins (make test-gpu)

The Python for each stack is found as $PYTHON_3_13 (for 3.13; likewise for the others), `python3.13` on PATH, or
pyenv's newest 3.13.x. A stack whose Python is missing fails with a line that says which to install.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONSTRAINTS = REPO / "constraints"
STACKS = {"colab": "colab-2026-08.txt", "gpu-runner": "gpu-runner-2026-12.txt", "lower-bounds": "lower-bounds.txt"}
SHOWN = ["torch", "torchvision", "numpy", "pillow", "kornia", "matplotlib"]
EXTRAS = "course,jupyter,test"
_PYTHON_LINE = re.compile(r"^#\s*python:\s*(\d+\.\d+)\s*$", re.MULTILINE)
_SUMMARY = re.compile(r"^=+ (.*\d+ (?:passed|failed|error).*) in [\d.]+s.*=+$", re.MULTILINE)


def stack_python_version(constraints: Path) -> str:
    """The `X.Y` a constraints file names in its `# python: X.Y` line."""
    match = _PYTHON_LINE.search(constraints.read_text(encoding="utf-8"))
    if match is None:
        raise ValueError(f"{constraints} names no Python: add a line `# python: 3.12` (the version it is for)")
    return match.group(1)


def pins(constraints: Path) -> dict[str, str]:
    """Distribution name (lower case) -> pinned version, from the file's `name==version` lines."""
    found = {}
    for line in constraints.read_text(encoding="utf-8").splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep:
            found[name.strip().lower()] = version.strip()
    return found


def find_python(version: str) -> str | None:
    """An interpreter for `version`: $PYTHON_X_Y, pyenv's newest X.Y.z, or pythonX.Y on PATH (not a pyenv shim)."""
    explicit = os.environ.get(f"PYTHON_{version.replace('.', '_')}")
    if explicit:
        return explicit
    root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates = sorted(
        glob.glob(f"{root}/versions/{version}.*/bin/python"),
        key=lambda p: [int(x) for x in re.findall(r"\d+", Path(p).parents[1].name)],
    )
    if candidates:
        return candidates[-1]
    on_path = shutil.which(f"python{version}")
    return on_path if on_path and "/shims/" not in on_path else None


def _run(command: list[str], log: Path, **kwargs) -> int:
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        return subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False, **kwargs).returncode


def install(python: str, venv: Path, constraints: Path, log: Path) -> str | None:
    """A fresh venv with the stack's pins and the course; None, or what failed."""
    shutil.rmtree(venv, ignore_errors=True)
    if _run([python, "-m", "venv", str(venv)], log):
        return f"could not make a venv with {python}"
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
    if _run([*pip, "-r", str(constraints)], log):  # the stack itself first, as a runtime would have it
        return f"pip could not install {constraints.name} (see {log})"
    if _run([*pip, "-c", str(constraints), "-e", f".[{EXTRAS}]"], log, cwd=REPO):
        return f"pip could not install the course with {constraints.name} kept (see {log})"
    return None


def versions_line(venv: Path) -> str:
    """`Python 3.13.0, torch 2.11.0, ...` as the venv has them."""
    code = (
        "import sys, importlib.metadata as m\nnames = sys.argv[1:]\nout = ['Python ' + sys.version.split()[0]]\n"
        "for n in names:\n    try: out.append(f'{n} {m.version(n)}')\n    except m.PackageNotFoundError: pass\n"
        "print(', '.join(out))"
    )
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code, *SHOWN], capture_output=True, text=True, check=False
    )
    return result.stdout.strip() or "versions unknown"


def pin_problems(venv: Path, constraints: Path) -> list[str]:
    """Pinned distributions whose installed version differs from the pin (pip must have kept every one)."""
    code = (
        "import sys, importlib.metadata as m\nfor n in sys.argv[1:]:\n"
        "    try: print(n, m.version(n))\n    except m.PackageNotFoundError: print(n, 'missing')"
    )
    wanted = pins(constraints)
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code, *wanted], capture_output=True, text=True, check=False
    )
    have = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    return [f"{n} {have.get(n)} (pinned {v})" for n, v in wanted.items() if have.get(n, "").split("+")[0] != v]


def pins_here(constraints: Path) -> list[str]:
    """Pinned distributions whose version in this interpreter's environment differs from the pin (or is missing)."""
    from importlib import metadata

    found = []
    for name, version in pins(constraints).items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = "missing"
        if have.split("+")[0] != version:
            found.append(f"{name} {have} (pinned {version})")
    return found


def run_tests(venv: Path, log: Path, extra: list[str]) -> tuple[int, str]:
    """make test's command in the venv, with the notebook-warning plugin; (exit status, pytest's summary)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "COURSE_"))}
    env.update({"COURSE_PROFILE": "smoke", "COURSE_OFFLINE": "1", "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}"})
    env["PYTHONPATH"] = str(REPO)  # as make test: the course (helpers, helpers.course) runs from the checkout
    # Its own (pytest runs sharing /tmp/pytest-of-USER delete each other's), and outside the checkout: a test's folder
    # under the repository finds the course by walking up (the Colab setup cell's tests saw the checkout, not their clone)
    basetemp = Path(tempfile.gettempdir()) / f"feeding-the-gpu-versions-{venv.name}"
    command = [
        str(venv / "bin" / "python"),
        "-m",
        "pytest",
        "tests",
        "notebooks",
        "helpers",
        "--doctest-modules",
        "--nbval-lax",
        "--nbval-current-env",
        "--nbval-cell-timeout=600",
        "-p",
        "no:cacheprovider",
        "-p",
        "tools.nb_warnings",
        f"--basetemp={basetemp}",
        *extra,
    ]
    status = _run(command, log, cwd=REPO, env=env)
    summaries = _SUMMARY.findall(log.read_text(encoding="utf-8", errors="replace"))
    return status, (summaries[-1] if summaries else f"pytest exit status {status}, no summary (see {log})")


def check_stack(name: str, venvs: Path, extra: list[str], *, reuse: bool = False) -> tuple[bool, str]:
    """Build, install and test one stack (`reuse`: keep a venv already built); (passed, its one-line result)."""
    constraints = CONSTRAINTS / STACKS[name]
    log = venvs / f"{name}.log"
    venvs.mkdir(parents=True, exist_ok=True)
    log.write_text(f"stack {name}: {constraints}\n", encoding="utf-8")
    version = stack_python_version(constraints)
    python = find_python(version)
    if python is None:
        return (
            False,
            f"versions {name}: no Python {version} here (install it, or set PYTHON_{version.replace('.', '_')})",
        )
    start = time.perf_counter()
    venv = venvs / name
    kept = reuse and (venv / "bin" / "python").exists()
    failure = None if kept else install(python, venv, constraints, log)
    installed_s = time.perf_counter() - start
    if failure is None:
        moved = pin_problems(venv, constraints)
        failure = f"the course's install changed pinned versions: {', '.join(moved)}" if moved else None
    if failure is not None:
        return False, f"versions {name}: FAILED to install: {failure}"
    status, summary = run_tests(venv, log, extra)
    tested_s = time.perf_counter() - start - installed_s
    built = "venv reused" if kept else f"install {installed_s / 60:.1f} min"
    line = f"versions {name} ({versions_line(venv)}): {summary}; {built}, tests {tested_s / 60:.1f} min (log: {log})"
    return status == 0, line


def main(argv: list[str] | None = None) -> int:
    """Command line: test the named stacks (default all) and print one line for each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", action="append", choices=sorted(STACKS), help="a stack to test (default: all)")
    parser.add_argument("--venvs", type=Path, default=REPO / ".venvs", help="where the venvs and logs go")
    parser.add_argument("--reuse", action="store_true", help="keep a stack's venv when it exists (a rerun)")
    parser.add_argument("--check-pins", type=Path, help="check this Python's packages against a constraints file")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.check_pins is not None:
        moved = pins_here(args.check_pins)
        for line in moved:
            print(f"versions: {line}: this environment does not have {args.check_pins.name}'s pin", file=sys.stderr)
        if not moved:
            print(f"versions: every pin of {args.check_pins.name} holds here ({sys.executable})")
        return 1 if moved else 0
    results = []
    for name in args.stack or list(STACKS):
        print(f"versions {name}: building {args.venvs / name} from constraints/{STACKS[name]} ...", flush=True)
        results.append(check_stack(name, args.venvs.resolve(), args.pytest_args, reuse=args.reuse))
        print(results[-1][1], flush=True)
    if len(results) > 1:
        print("\n".join(line for _, line in results))
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
