"""House rules for the notebooks: committed clean, a tagged parameters cell first, code imported from helpers."""

from __future__ import annotations

import ast
import re
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
    checks = _asserts(notebook)
    assert checks, f"{path.name}: a lesson must check its own results with assert statements"
    constant = [ast.unparse(a.test) for a in checks if isinstance(a.test, ast.Constant)]
    assert not constant, f"{path.name}: asserts that cannot fail check nothing: {constant}"
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
    assert "try: import helpers" in code[1].source, f"{path.name}: the second code cell must set up Colab"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_fits_100_columns(path):
    """A lesson's code reads without scrolling sideways (notebooks/ruff.toml formats and lints it at 100)."""
    notebook = nbformat.read(path, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    wide = [
        f"code cell {i} line {n}: {len(line)} columns"
        for i, cell in enumerate(code)
        for n, line in enumerate(cell.source.splitlines(), 1)
        if len(line) > 100
    ]
    assert not wide, f"{path.name}: lines over 100 columns (run `ruff format notebooks`): {wide}"


def _asserts(notebook) -> list[ast.Assert]:
    """The assert statements of a notebook's code (IPython magics and shell lines left out before parsing)."""
    found = []
    for cell in notebook.cells:
        if cell.cell_type == "code":
            code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
            found += [node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Assert)]
    return found


def test_the_series_is_numbered_consecutively_from_00():
    names = [p.name for p in NOTEBOOKS]
    badly_named = [n for n in names if not re.fullmatch(r"\d\d_[a-z0-9]+(_[a-z0-9]+)*\.ipynb", n)]
    assert not badly_named, f"notebooks are named NN_lower_snake_case.ipynb: {badly_named}"
    numbers = [int(n[:2]) for n in names]
    repeated = sorted({n for n in numbers if numbers.count(n) > 1})
    assert not repeated, f"two notebooks share the numbers {repeated}: renumber one"
    missing = sorted(set(range(max(numbers) + 1)) - set(numbers))
    assert not missing, f"the series skips {missing}: number the notebooks 00, 01, ... with no gap"
