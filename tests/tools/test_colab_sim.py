"""The Colab simulation's checks catch what they are for (the simulation itself runs from `make test-colab`)."""

from __future__ import annotations

from pathlib import Path

import nbformat

from tools.colab_sim import COLAB_PYTHON, COLAB_RUNTIME, check_notebook, check_packages
from tools.versions import CONSTRAINTS, STACKS, pins

CLONE = Path("/content/feeding-the-gpu")


def _executed(**changes) -> nbformat.NotebookNode:
    """An executed notebook as the simulation sees it: parameters, setup, a lesson cell, the injected check cell."""
    stream = nbformat.v4.new_output
    cells = [
        nbformat.v4.new_code_cell('profile = "auto"'),
        nbformat.v4.new_code_cell("# setup"),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("import helpers"),
    ]
    for count, cell in enumerate(cells, start=1):
        cell.execution_count = count
    cells[1].outputs = [stream("stream", name="stdout", text="course setup: found the course at /content\n")]
    cells[3].outputs = [stream("stream", name="stdout", text=f"HELPERS {CLONE}/helpers/__init__.py\nKORNIA True\n")]
    for index, outputs in changes.get("outputs", {}).items():
        cells[index].outputs = outputs
    for index in changes.get("not_run", []):
        cells[index].execution_count = None
    notebook = nbformat.v4.new_notebook()
    notebook.cells = cells
    return notebook


def test_a_clean_run_passes():
    assert check_notebook("00", _executed(), CLONE).ok


def test_errors_unrun_cells_stray_values_pip_noise_and_a_foreign_helpers_fail():
    error = nbformat.v4.new_output("error", ename="ValueError", evalue="broken", traceback=[])
    stray = nbformat.v4.new_output("execute_result", data={"text/plain": "False"}, execution_count=3)
    noise = nbformat.v4.new_output("stream", name="stdout", text="course setup: ok\nCollecting kornia\n")
    elsewhere = nbformat.v4.new_output("stream", name="stdout", text="HELPERS /work/helpers/__init__.py\n")
    check = check_notebook("04", _executed(outputs={2: [error, stray], 1: [noise], 3: [elsewhere]}, not_run=[2]), CLONE)
    assert not check.ok
    assert check.problems[0] == "code cell 2 did not run"
    assert "code cell 2: ValueError: broken" in check.problems
    assert "code cell 2 ends with an expression showing False" in check.problems
    assert any("printed more than its own lines: ['Collecting kornia']" in p for p in check.problems)
    assert any(p.startswith(f"helpers was not imported from the clone {CLONE}") for p in check.problems)


def test_a_changed_preinstalled_version_a_jupyter_server_or_the_course_installed_fails():
    before = {"torch": "2.8.0", "numpy": "2.0.2", "ipykernel": "6.17.1"}
    assert check_packages(before, {**before, "kornia": "0.8.1"}).ok
    changed = check_packages(
        before, {"torch": "2.8.0", "numpy": "2.3.0", "jupyter-server": "2.17.0", "feeding-the-gpu": "0.1.0"}
    )
    assert changed.problems == [
        "ipykernel 6.17.1 became uninstalled",
        "numpy 2.0.2 became 2.3.0",
        "the course's install added Jupyter server packages: ['jupyter-server']",
        "the setup installed the course itself (feeding-the-gpu): it runs from the clone",
    ]


def test_the_simulated_runtime_is_the_colab_stack_that_make_test_versions_tests():
    assert COLAB_PYTHON == "3.13"
    assert [f"{n}=={v}" for n, v in pins(CONSTRAINTS / STACKS["colab"]).items()] == COLAB_RUNTIME
    assert {"torch", "torchvision", "numpy", "pillow", "matplotlib", "ipykernel", "ipython"} <= {
        r.split("==")[0] for r in COLAB_RUNTIME
    }
