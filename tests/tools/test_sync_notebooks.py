"""Every notebook's Colab badge and setup cell are what tools/sync_notebooks.py makes from COURSE_REPOSITORY."""

from __future__ import annotations

import ast
import copy

import nbformat
import pytest

from tools import sync_notebooks
from tools.sync_notebooks import (
    badge_markdown,
    course_notebooks,
    course_repository,
    get_course_text,
    get_course_url,
    setup_cell_source,
    sync_notebook,
    synced_text,
)

REPOSITORY = "https://github.com/someone/my-fork"


def _lesson(setup_source: str | None = None) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell('profile = "auto"')
    parameters.metadata["tags"] = ["parameters"]
    cells = [nbformat.v4.new_markdown_cell("# 00 · A lesson\n\nWhat you will learn."), parameters]
    if setup_source is not None:
        cells.append(nbformat.v4.new_code_cell(setup_source))
    cells.append(nbformat.v4.new_code_cell("from helpers.course.profiles import resolve_profile"))
    notebook.cells = cells
    return notebook


def test_the_repository_constant_lives_in_pyproject():
    assert course_repository() == "https://github.com/feeding-the-gpu/feeding-the-gpu"


@pytest.mark.parametrize("path", course_notebooks(), ids=lambda p: p.name)
def test_notebook_badge_and_setup_cell_are_in_sync(path):
    current, wanted = synced_text(path, course_repository())
    in_sync = current == wanted  # (a bool, so that pytest prints the advice rather than two notebooks' JSON)
    assert in_sync, f"{path.name}: its Colab badge or setup cell drifted; run `make sync-notebooks`"


def test_badge_opens_the_notebook_on_main_in_colab():
    badge = badge_markdown(REPOSITORY, "04_gpu_augmentation.ipynb")
    assert badge == (
        "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
        "(https://colab.research.google.com/github/someone/my-fork/blob/main/notebooks/04_gpu_augmentation.ipynb)"
    )
    assert "someone/my-fork/" in badge_markdown(REPOSITORY + ".git", "x.ipynb")
    with pytest.raises(ValueError, match="not a https://github.com/OWNER/NAME URL"):
        badge_markdown("https://gitlab.com/someone/my-fork", "x.ipynb")


def test_setup_cell_is_three_lines_that_download_get_course_from_the_repository():
    source = setup_cell_source(REPOSITORY)
    tree = ast.parse(source)
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert imported == {"helpers"}  # tried, and nothing else: the downloaded file does the rest
    assert len(source.splitlines()) <= 3 and max(len(line) for line in source.splitlines()) <= 100
    url = "https://raw.githubusercontent.com/someone/my-fork/main/tools/get_course.py"
    assert get_course_url(REPOSITORY) == url and f'URL = "{url}"' in source
    assert "urlopen(URL)" in source and "except ImportError" in source
    local = setup_cell_source(REPOSITORY, script_url="file:///tmp/get_course.py")
    assert 'URL = "file:///tmp/get_course.py"' in local and local.splitlines()[1:] == source.splitlines()[1:]


def test_get_course_clones_the_repository_of_pyproject_by_default():
    text = sync_notebooks.GET_COURSE.read_text(encoding="utf-8")
    assert get_course_text(course_repository(), text) == text, "run `make sync-notebooks`"
    fork = get_course_text(REPOSITORY, text)
    assert f'def _get_course(repository: str = "{REPOSITORY}")' in fork and fork.count(REPOSITORY) == 1
    with pytest.raises(ValueError, match="no `def _get_course"):
        get_course_text(REPOSITORY, "print('not the file')")


def test_sync_adds_the_badge_cell_and_the_setup_cell_after_the_parameters_cell():
    notebook = sync_notebook(_lesson(), name="00_lesson.ipynb", repository=REPOSITORY)
    kinds = [(c.cell_type, c.source.splitlines()[0]) for c in notebook.cells]
    assert kinds[0] == ("markdown", badge_markdown(REPOSITORY, "00_lesson.ipynb"))
    assert kinds[1] == ("markdown", "# 00 · A lesson")  # the title cell is left as it was
    assert kinds[2] == ("code", 'profile = "auto"')
    assert notebook.cells[3].source == setup_cell_source(REPOSITORY)
    assert notebook.cells[4].source.startswith("from helpers")
    nbformat.validate(notebook)


def test_sync_replaces_an_old_setup_cell_in_place_and_is_idempotent():
    old = 'import importlib.util\nif importlib.util.find_spec("helpers") is None:\n    raise RuntimeError("clone it")'
    notebook = _lesson(old)  # the setup cell of 2026-11 is found by its marker too
    notebook.cells.insert(0, nbformat.v4.new_markdown_cell("[![Open In Colab](old.svg)](https://old)"))
    ids = [c.id for c in notebook.cells]
    once = sync_notebook(notebook, name="01_x.ipynb", repository=REPOSITORY)
    assert [c.id for c in once.cells] == ids  # replaced where they were, nothing inserted
    assert once.cells[0].source == badge_markdown(REPOSITORY, "01_x.ipynb")
    assert once.cells[3].source == setup_cell_source(REPOSITORY)
    twice = sync_notebook(copy.deepcopy(once), name="01_x.ipynb", repository=REPOSITORY)
    assert twice == once


def test_sync_refuses_a_notebook_without_a_parameters_cell_first():
    notebook = _lesson()
    notebook.cells[1].metadata["tags"] = []
    with pytest.raises(ValueError, match="00_bad.ipynb: the first code cell must be the `parameters` cell"):
        sync_notebook(notebook, name="00_bad.ipynb", repository=REPOSITORY)


def test_check_mode_reports_drift_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "00_lesson.ipynb"
    nbformat.write(_lesson(), path)
    before = path.read_text(encoding="utf-8")
    assert sync_notebooks.main(["--check", str(path)]) == 1
    assert path.read_text(encoding="utf-8") == before and "make sync-notebooks" in capsys.readouterr().out
    assert sync_notebooks.main([str(path)]) == 0
    synced = path.read_text(encoding="utf-8")
    assert synced != before and sync_notebooks.main(["--check", str(path)]) == 0
    assert sync_notebooks.main([str(path)]) == 0 and path.read_text(encoding="utf-8") == synced
