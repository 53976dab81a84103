"""Mutation testing of the library layer (`make mutate`): mutmut plants one small bug at a time in helpers/*.py (not
the course layer), runs the tests that reach it, and this script writes the mutants no test caught to a report.

    python tools/mutate.py                                   # every library module, [tool.mutmut]'s settings
    python tools/mutate.py --modules metrics resize --tests tests/test_metrics.py tests/test_resize.py

mutmut runs in a scratch copy of the working tree (reports/mutation-work/), so a subset run can narrow the modules and
tests without editing pyproject.toml, and a run cut off by `--time-limit` still reports what it finished.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as `tomli` (pytest brings it there)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from mutation_report import parse_results, write_report  # noqa: E402 (the sibling script, found via tools/)


def _settings() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def prepare(work: Path, modules: list[str] | None, tests: list[str] | None) -> None:
    """Copy the working tree's files (tracked and untracked, not ignored) to `work` and narrow its [tool.mutmut]."""
    if work.exists():
        shutil.rmtree(work)
    listed = (
        subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, work / name)
    text = (work / "pyproject.toml").read_text()
    if modules:
        text = narrow(text, "only_mutate", [f"helpers/{m.removesuffix('.py')}.py" for m in modules])
    if tests:
        text = narrow(text, "pytest_add_cli_args_test_selection", tests)
    (work / "pyproject.toml").write_text(text)


def narrow(pyproject: str, key: str, values: list[str]) -> str:
    """`pyproject` with [tool.mutmut]'s array `key` (on one line or several) replaced by `values`."""
    pattern = re.compile(rf"(?ms)^{re.escape(key)} = \[.*?\]$")
    if not pattern.search(pyproject):
        raise SystemExit(
            f"pyproject.toml: no `{key} = [...]` in [tool.mutmut] to narrow; restore it or drop the option"
        )
    return pattern.sub(lambda _: f"{key} = {_toml_list(values)}", pyproject, count=1)


def run_mutmut(work: Path, time_limit_s: float, max_children: int) -> tuple[float, bool]:
    """`mutmut run` in `work`, stopped after `time_limit_s`; returns (seconds taken, whether it was cut off)."""
    env = {
        **os.environ,
        "COURSE_PROFILE": "smoke",
        "COURSE_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "COURSE_DATA_DIR": str(work / "data"),
        "PYTHONPATH": "",
    }
    mutmut = Path(sys.executable).with_name("mutmut")
    started = time.perf_counter()
    process = subprocess.Popen(
        [str(mutmut), "run", "--max-children", str(max_children)], cwd=work, env=env, start_new_session=True
    )
    try:
        process.wait(timeout=time_limit_s)
        cut = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)  # mutmut and the test processes it forked
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        cut = True
    return time.perf_counter() - started, cut


def main(argv: list[str] | None = None) -> int:
    """Command line: run mutmut under a time limit, then write the report of surviving mutants."""
    settings = _settings()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", nargs="*", help="library modules to mutate, e.g. metrics resize (default: all)")
    parser.add_argument("--tests", nargs="*", help="test files to run (default: [tool.mutmut]'s selection)")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=float(os.environ.get("MUTATE_TIME_LIMIT", 3 * 3600)),
        help="seconds; the run stops there and reports what it finished",
    )
    parser.add_argument("--max-children", type=int, default=int(os.environ.get("MUTATE_CHILDREN", os.cpu_count() or 1)))
    parser.add_argument("--work", type=Path, default=ROOT / "reports" / "mutation-work")
    parser.add_argument("--report", type=Path, default=ROOT / "reports" / "mutation.md")
    args = parser.parse_args(argv)
    prepare(args.work, args.modules, args.tests)
    seconds, cut = run_mutmut(args.work, args.time_limit, args.max_children)
    results = parse_results(args.work)
    scope = ", ".join(args.modules) if args.modules else ", ".join(settings["only_mutate"])
    write_report(args.report, results, work=args.work, scope=scope, seconds=seconds, cut_off=cut)
    cut_note = " (cut off by the time limit)" if cut else ""
    print(f"{args.report}: {results.summary()} in {seconds / 60:.1f} min{cut_note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
