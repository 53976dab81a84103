"""The course runner executes a notebook in a fresh kernel and writes the executed copy, HTML and a summary."""

from __future__ import annotations

import json

import nbformat

from helpers.report import execute_notebook, write_report


def _notebook(path, sources):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(notebook, path)
    return path


def test_runner_executes_and_reports(tmp_path):
    good = execute_notebook(_notebook(tmp_path / "00_good.ipynb", ["x = 6 * 7", "assert x == 42\nprint(x)"]), tmp_path / "out")
    assert good.ok and good.executed_cells == good.code_cells == 2
    executed = nbformat.read(good.executed_path, as_version=4)
    assert executed.cells[1].outputs[0].text.strip() == "42"
    bad = execute_notebook(_notebook(tmp_path / "01_bad.ipynb", ["assert 1 == 2, 'broken lesson'", "y = 1"]), tmp_path / "out")
    assert not bad.ok and "broken lesson" in bad.error
    summary, index = write_report([good, bad], {"torch": "t", "torchvision": "v", "kornia": "k", "device": "cpu",
                                                "device_name": "x", "cpu_cores": 2, "python": "3"},
                                  "smoke", ["BSDS300 stand-in"], tmp_path / "out")
    text = summary.read_text()
    assert "00_good" in text and "FAILED" in text and "smoke" in text and "BSDS300 stand-in" in text
    assert "00_good.html" in index.read_text()
    assert len(json.loads((tmp_path / "out" / "runs.json").read_text())) == 2
