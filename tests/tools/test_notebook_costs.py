"""tools/notebook_costs.py writes one run's minutes into results/cpu-run.md's table and the notebooks' quotes alike."""

from __future__ import annotations

import nbformat
import notebook_costs

README = """# x

### Time per notebook

The home: the run above (`make course`, old run), the last measured run.

| notebook | seconds | minutes |
|---|---:|---:|
| 00 | 4 | 0.1 |
| 01 | 68 | 1.1 |

## Profiles
"""


def test_the_readme_table_and_description_take_the_runs_numbers():
    runs = {"runs": [{"name": "00_setup", "seconds": 3.6}, {"name": "01_naive", "seconds": 130.2}]}
    text = notebook_costs.update_times_page(README, notebook_costs.minutes_by_notebook(runs), "commit `abc`, busy")
    assert "| 00 | 4 | 0.1 |" in text and "| 01 | 130 | 2.2 |" in text and "| 01 | 68 |" not in text
    assert "the run above (commit `abc`, busy)" in text and text.endswith("## Profiles\n")


def test_a_notebooks_quote_is_rewritten_and_nothing_else(tmp_path):
    cost = "**What it costs.** Budgets.\n\nOn the last run this notebook took about 1.1 min; no GPU time has been measured."
    path = tmp_path / "01_x.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(cost)]), path)
    assert notebook_costs.update_notebook(path, "2.2") and not notebook_costs.update_notebook(path, "2.2")
    assert nbformat.read(path, 4).cells[0].source == cost.replace("1.1 min", "2.2 min")
