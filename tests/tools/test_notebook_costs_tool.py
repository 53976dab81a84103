"""tools/notebook_costs.py: a run's seconds become the README table's rows and minutes (and nothing outside that
section changes), and a notebook's "What it costs" quote is rewritten in place."""

from __future__ import annotations

import nbformat
from notebook_costs import minutes_by_notebook, update_notebook, update_readme  # tools/ is on the path

README = """# Course

this notebook took about 9.9 min (an unrelated line that looks like a quote)

### Time per notebook

The home of the minutes: the run above (profile `cpu`, commit `old`, a laptop), the last measured run.

| notebook | seconds | minutes |
|---|---:|---:|
| 00 | 4 | 0.1 |
| 02 | 223 | 3.7 |

## Next section

| 02 | 223 | 3.7 |
"""


def test_minutes_come_from_each_finished_notebooks_seconds():
    runs = {"runs": [{"name": "02_lazy.ipynb", "seconds": 245.0}, {"name": "03_amp.ipynb", "seconds": None}]}
    assert minutes_by_notebook(runs) == {"02": (245.0, "4.1")}  # an unfinished notebook has no minutes


def test_the_readme_table_and_description_change_and_nothing_else():
    text = update_readme(README, {"02": (245.0, "4.1")}, "profile `cpu`, commit `new`, a busy machine")
    section = text.split("### Time per notebook")[1].split("\n## Next section")[0]
    assert "| 02 | 245 | 4.1 |" in section and "| 00 | 4 | 0.1 |" in section
    assert "the run above (profile `cpu`, commit `new`, a busy machine)" in section
    assert text.split("## Next section")[1] == "\n\n| 02 | 223 | 3.7 |\n"  # the section after is left alone
    assert "9.9 min (an unrelated line" in text


def test_a_notebooks_quote_is_rewritten(tmp_path):
    path = tmp_path / "02_x.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("**What it costs.** On the last run this notebook took about 3.7 min.")
    ]
    nbformat.write(notebook, path)
    assert update_notebook(path, "4.1") and not update_notebook(path, "4.1")  # a second time: nothing to change
    assert "this notebook took about 4.1 min." in nbformat.read(path, as_version=4).cells[0].source
