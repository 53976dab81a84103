"""Notebook output that reads well: tables rendered in a kernel and printed elsewhere, "running now" lines, fonts."""

from __future__ import annotations

import json

import matplotlib as mpl
import nbformat
import pytest

from helpers.course import display as course_display
from helpers.course.display import COURSE_STYLE, announce, rows_to_markdown, show_table, use_course_style
from helpers.course.results import RESULTS_ENV_VAR, read_results, record_result
from helpers.course.runner import execute_notebook

ROWS = [
    {"rung": "lazy crop", "samples/s": 664.2, "efficiency": 0.4321, "workers": 2},
    {"rung": "decoded | cache", "samples/s": 31563.0, "efficiency": 0.96, "workers": 0},
]


def test_rows_become_a_markdown_table_with_numbers_right_aligned():
    text = rows_to_markdown(ROWS)
    lines = text.splitlines()
    assert lines[0] == "| rung | samples/s | efficiency | workers |"
    assert lines[1] == "|---|---:|---:|---:|"
    assert lines[2] == "| lazy crop | 664.2 | 0.432 | 2 |"
    assert lines[3] == "| decoded \\| cache | 31,563 | 0.96 | 0 |"  # a pipe inside a cell is escaped
    with pytest.raises(ValueError, match="at least one row"):
        rows_to_markdown([])


def test_outside_a_notebook_the_table_is_printed_and_returned(capsys):
    text = show_table(ROWS, title="SR ladder (smoke)")
    printed = capsys.readouterr().out
    assert printed.startswith("SR ladder (smoke)\n\n| rung |") and "| lazy crop |" in printed
    assert text == "**SR ladder (smoke)**\n\n" + rows_to_markdown(ROWS) and isinstance(text, str)
    assert show_table("| a | b |\n|---|---|\n| 1 | 2 |\n") == "| a | b |\n|---|---|\n| 1 | 2 |"


def test_the_returned_text_goes_into_the_report(tmp_path, monkeypatch, capsys):
    results = tmp_path / "results.jsonl"
    monkeypatch.setenv(RESULTS_ENV_VAR, str(results))
    assert record_result("ladder", show_table(ROWS))
    assert read_results(results) == [{"title": "ladder", "text": rows_to_markdown(ROWS)}]


def test_in_a_kernel_the_table_is_rendered_markdown_and_a_final_call_does_not_echo(tmp_path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "from helpers.course.display import announce, show_table, in_notebook\n"
            f"rows = {json.dumps(ROWS)}\n"
            "assert in_notebook()\n"
            "show_table(rows, title='the ladder')"
        ),
        nbformat.v4.new_code_cell("announce('the CIFAR ladder', seconds=130)"),
        nbformat.v4.new_code_cell("text = show_table('| a | b |\\n|---|---|\\n| 1 | 2 |')\ntext"),
    ]
    path = tmp_path / "00_display.ipynb"
    nbformat.write(notebook, path)
    run = execute_notebook(path, tmp_path / "out", cell_timeout=120)
    assert run.ok, run.error
    cells = nbformat.read(run.executed_path, as_version=4).cells
    [table] = cells[0].outputs  # one display: no Out[] echo of the returned text
    assert table.output_type == "display_data"
    assert table.data["text/markdown"].startswith("**the ladder**\n\n| rung | samples/s |")
    assert "| lazy crop | 664.2 |" in table.data["text/plain"]
    streams = [o for o in cells[1].outputs if o.output_type == "stream"]
    assert [o.name for o in streams] == ["stdout"]
    assert "".join(o.text for o in streams).strip() == "▶ running now: the CIFAR ladder (about 2 min)"
    assert [o.output_type for o in cells[2].outputs] == ["display_data"]  # `text` alone on the last line: silent


def test_announce_says_what_runs_and_for_about_how_long(capsys):
    assert announce("the loader sweep") == "▶ running now: the loader sweep"
    assert announce("training", seconds=42.4) == "▶ running now: training (about 42 s)"
    assert announce("training", 0.2).endswith("(about 1 s)")  # as the notebooks call it: announce(what, budget_s)
    assert announce("the full run", seconds=3 * 3600).endswith("(about 3.0 h)")
    assert capsys.readouterr().out.count("▶ running now:") == 4


def test_course_style_sets_readable_fonts():
    with mpl.rc_context():
        mpl.rcParams["xtick.labelsize"] = 6
        applied = use_course_style()
        assert applied == COURSE_STYLE
        assert mpl.rcParams["xtick.labelsize"] == COURSE_STYLE["xtick.labelsize"] >= 11
        assert min(COURSE_STYLE.values()) >= 11


def test_in_notebook_is_false_in_plain_python_and_true_with_a_kernel(monkeypatch):
    assert not course_display.in_notebook()

    class Shell:
        kernel = object()

    monkeypatch.setattr(course_display, "get_ipython", lambda: Shell())
    assert course_display.in_notebook()


def test_each_announced_part_is_timed_and_one_far_off_its_estimate_is_marked(monkeypatch):
    clock = iter([100.0, 103.0, 104.0, 160.0])  # the first part ends as the second is announced: 3 s, then 56 s
    monkeypatch.setattr(course_display.time, "perf_counter", lambda: next(clock))
    course_display.PARTS.clear()
    announce("the loader", seconds=4)
    announce("the doctor", seconds=8)
    text = course_display.parts_text()
    assert "- the loader: announced 4 s, took 3 s\n" in text
    assert text.endswith("- the doctor: announced 8 s, took 56 s (7.0x off what was announced)")
    assert [p.off_by for p in course_display.PARTS] == pytest.approx([4 / 3, 56 / 8])
    course_display.PARTS.clear()
    assert course_display.parts_text() == ""
