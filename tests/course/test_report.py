"""The course runner executes a notebook in a fresh kernel and writes the executed copy, HTML and a summary."""

from __future__ import annotations

import json

import nbformat

from helpers.course.report import execute_notebook, write_report
from helpers.course.results import RESULTS_ENV_VAR, read_results, record_result


def _notebook(path, sources):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(notebook, path)
    return path


def test_runner_executes_and_reports(tmp_path, monkeypatch):
    results_file = tmp_path / "results.jsonl"
    monkeypatch.setenv(RESULTS_ENV_VAR, str(results_file))  # the kernel inherits it, as under `make course`
    recording = "from helpers.course.results import record_result\nrecord_result('ladder', '| rung | 42 |')"
    good = execute_notebook(
        _notebook(tmp_path / "00_good.ipynb", ["x = 6 * 7", "assert x == 42\nprint(x)", recording]), tmp_path / "out"
    )
    assert good.ok and good.executed_cells == good.code_cells == 3
    executed = nbformat.read(good.executed_path, as_version=4)
    assert executed.cells[1].outputs[0].text.strip() == "42"
    bad = execute_notebook(_notebook(tmp_path / "01_bad.ipynb", ["assert 1 == 2, 'broken lesson'", "y = 1"]), tmp_path / "out")
    assert not bad.ok and "broken lesson" in bad.error
    environment = {"torch": "t", "torchvision": "v", "kornia": "k", "device": "cpu", "device_name": "x",
                   "cpu_cores": 2, "python": "3"}  # fmt: skip
    results = read_results(results_file)
    assert results == [{"title": "ladder", "text": "| rung | 42 |"}]
    summary, index = write_report([good, bad], environment, "smoke", ["BSDS300 stand-in"], tmp_path / "out", results)
    text = summary.read_text()
    assert "00_good" in text and "FAILED" in text and "smoke" in text and "BSDS300 stand-in" in text
    assert "## ladder" in text and "| rung | 42 |" in text
    assert "00_good.html" in index.read_text() and "<h2>ladder</h2>" in index.read_text()
    assert len(json.loads((tmp_path / "out" / "runs.json").read_text())) == 2
    assert not _kernel_children(), "the runner must stop each notebook's kernel before the next one starts"


def _kernel_children() -> list[int]:
    """PIDs of ipykernel processes whose parent is this process."""
    import os
    from pathlib import Path

    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and b"ipykernel" in cmdline:
            children.append(int(stat.parent.name))
    return children


def test_a_notebook_that_ran_no_code_is_a_failure(tmp_path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# a lesson that forgot its code")]
    nbformat.write(notebook, tmp_path / "02_empty.ipynb")
    run = execute_notebook(tmp_path / "02_empty.ipynb", tmp_path / "out")
    assert run.code_cells == 0 and not run.ok


def test_record_result_is_a_no_op_outside_a_course_run(monkeypatch):
    monkeypatch.delenv(RESULTS_ENV_VAR, raising=False)
    assert record_result("title", "text") is False
