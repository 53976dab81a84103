"""tools/notebook_costs.py: a run's seconds become results/cpu-run.md's table rows and minutes (and nothing outside that
section changes), and a notebook's "What it costs" quote is rewritten in place."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import notebook_costs  # tools/ is on the path
import pytest
from notebook_costs import minutes_by_notebook, update_notebook, update_times_page

from helpers.course.profiles import PROFILES
from tests.course.test_profiles import SPENDS, spent_s

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
    text = update_times_page(README, {"02": (245.0, "4.1")}, "profile `cpu`, commit `new`, a busy machine")
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


# --- the estimates: each notebook's cost in the full profile on a T4 and an H200, labelled, until measured ---------

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.name for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PAYLOAD = {
    "overrun": 1.05,
    "notebooks": {"05_x.ipynb": {"budgets_s": 980, "T4": {"other_s": 180}, "H200": {"other_s": 210}}},
}


def test_an_estimate_is_budgets_times_the_overrun_plus_the_rest_and_says_it_is_one():
    minutes = notebook_costs.estimated_minutes(PAYLOAD)
    assert minutes == {"05_x.ipynb": {"T4": 20.1, "H200": 20.6}}  # (980 x 1.05 + 180) / 60, (... + 210) / 60
    assert notebook_costs.estimate_line(minutes["05_x.ipynb"]) == (
        "Estimated for the `full` profile, not measured: 20.1 min on a T4, 20.6 min on an H200 "
        "(`results/estimates/notebook-costs-full.json` says how)."
    )


def test_the_estimate_sentence_is_added_once_and_replaced_and_the_quote_kept(tmp_path):
    cost = "**What it costs.** Budgets.\n\nOn the last run this notebook took about 3.7 min; no GPU time has been measured."
    path = tmp_path / "05_x.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(cost)]), path)
    first = notebook_costs.estimate_line({"T4": 20.1, "H200": 20.6})
    assert update_notebook(path, None, first) and not update_notebook(path, None, first)
    assert nbformat.read(path, as_version=4).cells[0].source == cost + "\n\n" + first
    second = notebook_costs.estimate_line({"T4": 19.0, "H200": 21.0})
    assert update_notebook(path, "4.1", second)
    source = nbformat.read(path, as_version=4).cells[0].source
    assert source == cost.replace("3.7 min", "4.1 min") + "\n\n" + second  # the old estimate replaced, not kept


def test_without_a_run_the_tool_writes_only_the_estimates(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    cost = "**What it costs.** On the last run this notebook took about 3.7 min."
    path = tmp_path / "notebooks" / "05_x.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(cost)]), path)
    (tmp_path / "estimates.json").write_text(json.dumps(PAYLOAD))
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "cpu-run.md").write_text("untouched")
    monkeypatch.setattr(notebook_costs, "ROOT", tmp_path)
    notebook_costs.main(["--estimates", str(tmp_path / "estimates.json")])
    source = nbformat.read(path, as_version=4).cells[0].source
    assert source.startswith(cost) and "20.1 min on a T4, 20.6 min on an H200 (`estimates.json` says how)" in source
    assert (tmp_path / "results" / "cpu-run.md").read_text() == "untouched"


ESTIMATES = json.loads(notebook_costs.ESTIMATES.read_text())


def test_the_estimates_file_covers_every_notebook_and_says_it_holds_estimates():
    assert sorted(ESTIMATES["notebooks"]) == NOTEBOOKS  # a renamed or new notebook needs its estimate
    assert ESTIMATES["estimates"] is True and ESTIMATES["what"].startswith("ESTIMATES, not measurements")
    assert set(ESTIMATES["devices"]) == set(notebook_costs.DEVICES) and ESTIMATES["profile"] == "full"
    for name, entry in ESTIMATES["notebooks"].items():
        assert all(len(entry[device]["basis"]) > 40 for device in notebook_costs.DEVICES), f"{name}: say how"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_each_estimate_counts_the_budgets_the_profile_gives_the_notebook(name):
    full = PROFILES["full"]
    budgets = spent_s(full, name[:2]) if name[:2] in SPENDS else 0
    assert ESTIMATES["notebooks"][name]["budgets_s"] == budgets, (
        f"{name}: helpers/course/profiles.py gives it {budgets:g} s of budgets now; re-estimate it"
    )
    minutes = notebook_costs.estimated_minutes(ESTIMATES)[name]
    assert max(minutes.values()) * 60 <= full.notebook_limit_s


def test_05s_two_trainings_fit_its_limit_on_a_t4_that_slows_down():
    """05 trains x4 and x2 in the full profile; on a T4 that sustains only 2/3 of its calibrated speed the two
    trainings and the rest of the notebook still end inside the limit the course runner enforces."""
    entry, slowdown = ESTIMATES["notebooks"]["05_train_super_resolution.ipynb"], ESTIMATES["slowdown"]
    assert slowdown["device"] == "T4" and slowdown["factor"] >= 1.5
    worst = entry["budgets_s"] * slowdown["factor"] + entry["T4"]["other_s"]
    assert worst <= PROFILES["full"].notebook_limit_s, f"05 would take {worst:.0f} s on a slowed T4"


ONE_RUN_README = """# x

### Time per notebook

The home: the run above (`make course`, old run), the last measured run.

| notebook | seconds | minutes |
|---|---:|---:|
| 00 | 4 | 0.1 |
| 01 | 68 | 1.1 |

## Profiles
"""


class TestOneRunIntoTheTableAndTheQuotes:
    """tools/notebook_costs.py writes one run's minutes into results/cpu-run.md's table and the notebooks' quotes
    alike."""

    def test_the_readme_table_and_description_take_the_runs_numbers(self):
        runs = {"runs": [{"name": "00_setup", "seconds": 3.6}, {"name": "01_naive", "seconds": 130.2}]}
        text = notebook_costs.update_times_page(
            ONE_RUN_README, notebook_costs.minutes_by_notebook(runs), "commit `abc`, busy"
        )
        assert "| 00 | 4 | 0.1 |" in text and "| 01 | 130 | 2.2 |" in text and "| 01 | 68 |" not in text
        assert "the run above (commit `abc`, busy)" in text and text.endswith("## Profiles\n")

    def test_a_notebooks_quote_is_rewritten_and_nothing_else(self, tmp_path):
        cost = "**What it costs.** Budgets.\n\nOn the last run this notebook took about 1.1 min; no GPU time has been measured."
        path = tmp_path / "01_x.ipynb"
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(cost)]), path)
        assert notebook_costs.update_notebook(path, "2.2") and not notebook_costs.update_notebook(path, "2.2")
        assert nbformat.read(path, 4).cells[0].source == cost.replace("1.1 min", "2.2 min")
