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
    assert "start_lesson(profile)" in source or "resolve_profile(profile)" in source, (
        f"{path.name}: must resolve its profile from the parameters cell"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_lesson_is_skipped_and_each_finds_helpers_anywhere(path):
    notebook = nbformat.read(path, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert len(code) >= 4, f"{path.name}: a lesson needs real code cells, not only set-up"
    for cell in code:
        tags = set(cell.metadata.get("tags", []))
        assert not tags & {"skip-execution", "raises-exception", "nbval-skip"}, f"{path.name}: a cell is skipped"
        assert "NBVAL_SKIP" not in cell.source and "NBVAL_RAISES_EXCEPTION" not in cell.source
    assert 'find_spec("helpers")' in code[1].source, f"{path.name}: the second code cell must set up Colab"


def test_the_series_is_complete():
    numbers = [p.name[:2] for p in NOTEBOOKS]
    assert numbers == [f"{i:02d}" for i in range(len(NOTEBOOKS))] and len(NOTEBOOKS) == 9
