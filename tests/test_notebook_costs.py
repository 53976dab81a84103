"""Every notebook's "What it costs" gives minutes from one home: results/cpu-run.md's "Time per notebook" table (the last
measured `make course`), and never a measured GPU time, since no GPU run has been committed; where it gives the full
profile's estimates on a T4 and an H200, they are labelled as estimates and are the estimates file's
(results/estimates/notebook-costs-full.json, written by tools/notebook_costs.py)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def page_minutes(text: str) -> dict[str, str]:
    """results/cpu-run.md's "Time per notebook" table as {notebook number: minutes}."""
    section = text.split("### Time per notebook", 1)[1].split("\n#", 1)[0]
    return {number: minutes for number, minutes in re.findall(r"^\| (\d\d) \| \d+ \| (\d+\.\d) \|$", section, re.M)}


def quoted_minutes(notebook: nbformat.NotebookNode) -> list[str]:
    """The minutes the notebook's "What it costs" paragraph quotes."""
    cells = [c.source for c in notebook.cells if c.cell_type == "markdown" and "**What it costs.**" in c.source]
    assert len(cells) == 1, "one markdown cell holds the 'What it costs' paragraph"
    measured = re.sub(r"\nEstimated for the `full` profile, not measured: [^\n]*", "", cells[0])  # GPU estimates
    return re.findall(r"about (\d+\.\d) min\b", measured)


def test_the_times_table_covers_every_notebook():
    assert sorted(page_minutes((ROOT / "results" / "cpu-run.md").read_text())) == [p.name[:2] for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_what_it_costs_quotes_the_page_minutes_and_no_gpu_time(path):
    minutes = page_minutes((ROOT / "results" / "cpu-run.md").read_text())
    notebook = nbformat.read(path, as_version=4)
    assert quoted_minutes(notebook) == [minutes[path.name[:2]]], (
        f"{path.name}: 'What it costs' must quote results/cpu-run.md's 'Time per notebook' minutes ({minutes[path.name[:2]]})"
    )
    cost = next(c.source for c in notebook.cells if "**What it costs.**" in c.source)
    assert "no GPU time has been measured" in cost and not re.search(r"min[^.]*\bon (a|the|one) GPU\b", cost)


def test_a_stale_quote_is_caught():
    stale = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("**What it costs.** about 9.9 min")])
    assert quoted_minutes(stale) == ["9.9"] != [page_minutes((ROOT / "results" / "cpu-run.md").read_text())["01"]]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_an_estimate_a_notebook_quotes_is_the_estimates_files_labelled_as_such(path):
    import json
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    from notebook_costs import ESTIMATES, estimate_line, estimated_minutes

    cost = next(c.source for c in nbformat.read(path, as_version=4).cells if "**What it costs.**" in c.source)
    quoted = re.findall(r"^Estimated for the `full` profile, not measured: .*$", cost, re.M)
    if quoted:  # written by `python tools/notebook_costs.py`; a notebook the tool has not reached yet quotes none
        expected = estimate_line(estimated_minutes(json.loads(ESTIMATES.read_text()))[path.name])
        assert quoted == [expected], f"{path.name}: rerun python tools/notebook_costs.py (the estimates changed)"
