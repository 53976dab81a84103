"""CI's oldest-Python check (tools/oldest_python.py): it reads the floor and the declared dependencies from
pyproject.toml, rebuilds its cached venv when either input changes, and its import and compile steps name the
module or the notebook cell that does not load (run here with this Python, on a small made-up checkout)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import oldest_python  # tools/ is on the path: tests/tools/conftest.py

ROOT = Path(__file__).resolve().parents[2]


def test_the_floor_and_the_stack_agree_and_the_requirements_are_the_declared_ones():
    floor = oldest_python.floor_version(ROOT / "pyproject.toml")
    stack = oldest_python.versions.CONSTRAINTS / oldest_python.versions.STACKS[oldest_python.STACK]
    assert oldest_python.versions.stack_python_version(stack) == floor
    requirements = oldest_python.declared_requirements(ROOT / "pyproject.toml")
    assert any(r.startswith("torch>=") for r in requirements)  # base
    assert any(r.startswith("matplotlib") for r in requirements)  # course
    assert any(r.startswith("nbval") for r in requirements)  # test
    assert not any(r.startswith("mutmut") for r in requirements)  # not an extra the course runs with


def test_the_cached_venv_is_rebuilt_when_its_inputs_change(tmp_path):
    constraints = tmp_path / "c.txt"
    constraints.write_text("torch==2.6.0\n")
    key = oldest_python.venv_key(constraints, ["torch>=2.6"])
    assert oldest_python.venv_key(constraints, ["torch>=2.6"]) == key
    assert oldest_python.venv_key(constraints, ["torch>=2.6", "kornia>=0.7.4"]) != key
    constraints.write_text("torch==2.7.0\n")
    assert oldest_python.venv_key(constraints, ["torch>=2.6"]) != key


def _checkout(tmp_path: Path) -> Path:
    (tmp_path / "helpers" / "course").mkdir(parents=True)
    (tmp_path / "helpers" / "__init__.py").write_text("")
    (tmp_path / "helpers" / "course" / "__init__.py").write_text("")
    (tmp_path / "helpers" / "fine.py").write_text("import json\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "tool.py").write_text("import os\n")
    (tmp_path / "notebooks").mkdir()
    return tmp_path


def _run(script: str, repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, str(repo)],
        cwd=repo,
        env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_import_step_names_a_course_module_and_a_tool_that_do_not_import(tmp_path):
    repo = _checkout(tmp_path)
    assert _run(oldest_python._IMPORT_ALL, repo).returncode == 0
    (repo / "helpers" / "course" / "late.py").write_text("import no_such_module_on_any_python\n")
    (repo / "tools" / "broken.py").write_text("from os import no_such_name\n")
    done = _run(oldest_python._IMPORT_ALL, repo)
    assert done.returncode == 1
    assert "cannot import helpers.course.late: ModuleNotFoundError" in done.stdout
    assert "cannot import tools/broken.py: ImportError" in done.stdout
    assert "imported 4 of 6" in done.stdout  # helpers, helpers.course, fine; tool.py


def test_the_compile_step_names_the_notebook_cell_and_lets_magics_through(tmp_path):
    repo = _checkout(tmp_path)
    cells = [
        {"cell_type": "markdown", "source": ["not code("]},
        {"cell_type": "code", "source": ["%matplotlib inline\n", "!pip list\n", "x = 1\n"]},
        {"cell_type": "code", "source": ["def f(:\n"]},
    ]
    (repo / "notebooks" / "01_x.ipynb").write_text(json.dumps({"cells": cells}))
    done = _run(oldest_python._COMPILE_CELLS, repo)
    assert done.returncode == 1
    assert "01_x.ipynb cell 2 does not compile" in done.stdout
    assert "compiled 1 of 2 notebook code cells" in done.stdout
