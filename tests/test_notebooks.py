"""House rules for the notebooks: committed clean, a tagged parameters cell first, code imported from helpers."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS and NOTEBOOKS[0].name.startswith("00_")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"{path.name}: code cells {dirty} have outputs or execution counts; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_code_cell_is_the_parameters_cell(path):
    notebook = nbformat.read(path, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code, f"{path.name}: has no code cells"
    assert "parameters" in code[0].metadata.get("tags", []), f"{path.name}: first code cell is not tagged 'parameters'"
    assert "profile" in code[0].source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_imports_helpers_and_checks_itself(path):
    notebook = nbformat.read(path, as_version=4)
    source = "\n".join(c.source for c in notebook.cells if c.cell_type == "code")
    assert "from helpers" in source, f"{path.name}: reusable code must come from helpers"
    assert "assert " in source, f"{path.name}: a lesson must check its own results with asserts"
    assert "resolve_profile(profile)" in source, f"{path.name}: must resolve its profile from the parameters cell"
