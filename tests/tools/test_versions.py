"""make test-versions: each stack is a constraints file naming its Python; the lower bounds are exactly what
pyproject.toml declares; the runner reads pytest's summary; a deprecation warning in a notebook's output fails."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tools import nb_warnings, versions

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _floors() -> dict[str, str]:
    """Each library and course requirement's `>=` version (what the lower-bound stack must pin)."""
    extras = PROJECT["optional-dependencies"]
    floors = {}
    for text in PROJECT["dependencies"] + extras["library"] + extras["course"]:
        requirement = Requirement(text)
        (floor,) = [s.version for s in requirement.specifier if s.operator == ">="]
        floors[requirement.name.lower()] = floor
    return floors


def test_every_stack_names_its_python_and_pins_torch():
    for name, file in versions.STACKS.items():
        constraints = versions.CONSTRAINTS / file
        assert re.fullmatch(r"3\.\d+", versions.stack_python_version(constraints)), name
        assert {"torch", "torchvision", "numpy"} <= set(versions.pins(constraints)), name
        assert re.search(r"20\d\d-\d\d-\d\d", constraints.read_text()), f"{file} says when it was read"


def test_the_lower_bounds_are_what_pyproject_declares():
    constraints = versions.CONSTRAINTS / versions.STACKS["lower-bounds"]
    pinned = {name: Version(v) for name, v in versions.pins(constraints).items()}
    assert pinned == {name: Version(v) for name, v in _floors().items()}
    assert PROJECT["requires-python"] == f">={versions.stack_python_version(constraints)}"


def test_a_constraints_file_without_a_python_line_is_named(tmp_path):
    bare = tmp_path / "stack.txt"
    bare.write_text("torch==2.6.0  # the lowest\n\n# numpy==1.0\n")
    assert versions.pins(bare) == {"torch": "2.6.0"}
    with pytest.raises(ValueError, match=r"stack.txt names no Python: add a line `# python: 3.12`"):
        versions.stack_python_version(bare)


def test_the_runner_reads_pytests_last_summary_line():
    log = (
        "=== 3 passed in 1.0s ===\nnoise\n"
        "========== 1 failed, 640 passed, 36 skipped, 2 warnings in 812.34s (0:13:32) ==========\n"
    )
    assert versions._SUMMARY.findall(log)[-1] == "1 failed, 640 passed, 36 skipped, 2 warnings"


def test_make_test_versions_runs_one_stack_or_all():
    makefile = (ROOT / "Makefile").read_text()
    target = makefile.split("\ntest-versions:", 1)[1].split("\n\n", 1)[0]
    assert "tools/versions.py $(foreach s,$(STACK),--stack $(s))" in target
    assert re.search(r"^STACK \?=", makefile, re.MULTILINE)


def _report(item, when="call"):
    """Drive the plugin's hook wrapper as pytest would; return the report it leaves."""
    report = SimpleNamespace(passed=True, outcome="passed", longrepr=None)
    hook = nb_warnings.pytest_runtest_makereport(item, SimpleNamespace(when=when))
    next(hook)
    with pytest.raises(StopIteration):
        hook.send(SimpleNamespace(get_result=lambda: report))
    return report


def test_a_notebook_cell_showing_a_deprecation_warning_fails():
    warned = {
        "output_type": "stream",
        "name": "stderr",
        "text": "x.py:3: FutureWarning: `torch.cuda.amp.custom_fwd(args...)` is deprecated.\n  fwd()\n",
    }
    clean = {"output_type": "stream", "name": "stdout", "text": "the lesson's numbers\n"}
    failed = _report(SimpleNamespace(test_outputs=[clean, warned]))
    assert failed.outcome == "failed" and "FutureWarning: `torch.cuda.amp.custom_fwd" in failed.longrepr
    assert _report(SimpleNamespace(test_outputs=[clean])).outcome == "passed"
    assert _report(SimpleNamespace(test_outputs=[warned]), when="setup").outcome == "passed"
    assert _report(SimpleNamespace()).outcome == "passed"  # not a notebook cell
    shown = {"output_type": "display_data", "data": {"text/plain": "DeprecationWarning: old"}}
    assert nb_warnings.deprecation_lines([shown]) == ["DeprecationWarning: old"]
    subclass = {"output_type": "stream", "name": "stderr", "text": "PyparsingDeprecationWarning: 'parseString'\n"}
    assert nb_warnings.deprecation_lines([subclass, clean]) == ["PyparsingDeprecationWarning: 'parseString'"]


def test_each_stack_runs_the_pytest_command_of_make_test(tmp_path, monkeypatch):
    """Every argument `make test` gives pytest (the docstring examples' --doctest-modules and helpers/ too) is in the
    command a stack runs; only the cell timeout is a number there, not a make variable."""
    target = (ROOT / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    wanted = [word for word in target.split("-m pytest", 1)[1].replace("\\\n", " ").split() if "$(" not in word]
    commands = []
    monkeypatch.setattr(versions, "_run", lambda command, log, **kwargs: commands.append(command) or 0)
    (tmp_path / "log").write_text("")
    versions.run_tests(tmp_path / "venv", tmp_path / "log", [])
    assert "--doctest-modules" in wanted and "helpers" in wanted
    assert not set(wanted) - set(commands[0]), f"make test's {sorted(set(wanted) - set(commands[0]))} missing"
