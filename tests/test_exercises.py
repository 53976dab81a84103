"""Every "Try it" exercise has a worked answer, and the answers' code runs against the notebook as it is: each name
it uses is defined or imported by the notebook (or by the answer itself), and profile sizes change through the
parameters cell or `dataclasses.replace`, never by assigning to a frozen profile."""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("0[1-8]_*.ipynb"))
# Names an answer uses on purpose that the notebook cannot define: the learner's own objects, or a library file's
# locals (an answer that edits helpers/jpeg_crop.py's map_box).
OUTSIDE = {
    "03": {"my_model", "my_inputs", "my_targets", "my_loss_fn"},
    "07": {"reduced", "full", "left", "top", "box_w", "box_h"},
}


def sections(notebook: nbformat.NotebookNode) -> tuple[str, str]:
    """The markdown of the "Try it" list and of its answers."""
    text = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    tries = text.split("## Try it", 1)[1].split("## Answers to Try it", 1)[0]
    return tries, text.split("## Answers to Try it", 1)[1]


def defined_names(tree: ast.AST) -> set[str]:
    """Every name a piece of code binds: assignments, loop targets, defs, classes, imports, arguments."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def used_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def answer_code(answers: str) -> list[str]:
    """The python code blocks of the answers, dedented (some are lines inside a cell's loop)."""
    return [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", answers, flags=re.S)]


def answer_blocks(answers: str) -> list[ast.AST]:
    return [ast.parse(code) for code in answer_code(answers)]


def unknown_names(notebook: nbformat.NotebookNode, number: str) -> set[str]:
    """Names the answers' code uses that neither the notebook, the answer, nor Python defines."""
    code = "\n".join(c.source for c in notebook.cells if c.cell_type == "code")
    known = defined_names(ast.parse(code)) | set(dir(builtins)) | OUTSIDE.get(number, set())
    missing = set()
    for block in answer_blocks(sections(notebook)[1]):
        missing |= used_names(block) - known - defined_names(block)
    return missing


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_exercise_has_a_worked_answer(path):
    tries, answers = sections(nbformat.read(path, as_version=4))
    exercises = re.findall(r"^(\d+)\. ", tries, flags=re.M)
    worked = re.findall(r"<details><summary>(\d+)\.", answers)
    assert exercises and worked == exercises, f"{path.name}: exercises {exercises}, answers {worked}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_answers_use_only_names_the_notebook_has(path):
    notebook = nbformat.read(path, as_version=4)
    assert not unknown_names(notebook, path.name[:2]), f"{path.name}: answers use undefined names"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_answers_change_sizes_through_parameters_not_a_frozen_profile(path):
    notebook = nbformat.read(path, as_version=4)
    parameters = next(c for c in notebook.cells if c.cell_type == "code")
    allowed = defined_names(ast.parse(parameters.source))
    for block in answer_blocks(sections(notebook)[1]):
        for node in ast.walk(block):
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                assert not any(isinstance(t, ast.Attribute) for t in targets), f"{path.name}: assigns to an attribute"
    for code in answer_code(sections(notebook)[1]):  # a parameter's line, as the parameters cell writes it
        named = set(re.findall(r"^(\w+) = .*# .*None: the profile's", code, flags=re.M))
        assert named <= allowed, f"{path.name}: {named - allowed} is not a parameter of the notebook"


def test_a_missing_import_or_answer_is_caught():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("profile = 'auto'"),
        nbformat.v4.new_markdown_cell(
            "## Try it\n\n1. Rotate.\n2. Crop.\n\n## Answers to Try it\n\n"
            "<details><summary>1. Rotate</summary>\n\n```python\nK.RandomRotation(15.0)\n```"
        ),
    ]
    assert unknown_names(notebook, "99") == {"K"}
    tries, answers = sections(notebook)
    assert re.findall(r"^(\d+)\. ", tries, flags=re.M) != re.findall(r"<details><summary>(\d+)\.", answers)
