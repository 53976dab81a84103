"""The course run's report: the provenance line says which notebooks ran on a busy machine, the index renders the
recorded tables as escaped HTML, and saved progress bars read their final state."""

from __future__ import annotations

import nbformat

from helpers.course.report import (
    WIDGET_STATE,
    WIDGET_VIEW,
    NotebookRun,
    _markdown_html,
    final_progress_text,
    provenance_line,
)


def test_the_summary_says_which_notebooks_ran_on_a_busy_machine():
    quiet = {"other_cores": 0.0, "cores": 2, "seconds": 5.0, "load_average": 0.1, "busy": False}
    busy = {"other_cores": 0.8, "cores": 2, "seconds": 5.0, "load_average": 1.9, "busy": True}
    runs = [NotebookRun("01_a", 5.0, 1, 1, "a", "a", load=quiet), NotebookRun("02_b", 5.0, 1, 1, "b", "b", load=busy)]
    line = provenance_line(runs, {"commit": "0123456789abcdef", "dirty": True})
    assert line.startswith("commit 0123456789ab with uncommitted changes")
    assert "up to 0.8 of 2 cores" in line and "busy during 02_b" in line and "01_a" not in line
    assert "averaged over each notebook" in line  # a notebook's own measurements can read more than its average
    assert provenance_line(runs[:1], {"commit": None, "dirty": None}).startswith("not a git checkout")
    assert "busy during" not in provenance_line(runs[:1], {"commit": None, "dirty": None})


def test_index_renders_recorded_tables_as_html_and_escapes_their_text():
    page = _markdown_html("**ladder [device: cpu]**\n\n| rung | samples/s |\n|---|---:|\n| <script>x</script> | 42 |")
    assert "<table>" in page and "<strong>ladder [device: cpu]</strong>" in page and "<pre>" not in page
    assert '<td style="text-align:right">42</td>' in page
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_saved_progress_bars_read_their_final_state():
    def model(name, **state):
        return {"model_name": name, "state": state}

    state = {
        "box": model("HBoxModel", children=["IPY_MODEL_l", "IPY_MODEL_b", "IPY_MODEL_r"]),
        "l": model("HTMLModel", value="train:\u2007100%"),
        "b": model("FloatProgressModel", value=4.0, max=4.0),
        "r": model("HTMLModel", value="\u20074/4\u2007[00:02&lt;00:00]"),
        "other": model("IntSliderModel"),
    }
    state["gone"] = model("HBoxModel", children=["IPY_MODEL_l", "IPY_MODEL_b", "IPY_MODEL_r"], layout="IPY_MODEL_y")
    state["y"] = model("LayoutModel", visibility="hidden")  # tqdm(leave=False) hides its bar when it closes
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["widgets"] = {WIDGET_STATE: {"state": state}}
    bar = {
        "output_type": "display_data",
        "metadata": {},
        "data": {WIDGET_VIEW: {"model_id": "box"}, "text/plain": "train:   0%|          | 0/4"},
    }
    slider = {
        "output_type": "display_data",
        "metadata": {},
        "data": {WIDGET_VIEW: {"model_id": "other"}, "text/plain": "IntSlider()"},
    }
    gone = {**bar, "data": {WIDGET_VIEW: {"model_id": "gone"}, "text/plain": "eval:   0%|          | 0/4"}}
    notebook.cells = [nbformat.v4.new_code_cell("x", outputs=[bar, slider, gone])]
    assert final_progress_text(notebook) == 2
    outputs = notebook.cells[0].outputs
    assert outputs[0]["data"]["text/plain"] == "train: 100%|██████████| 4/4 [00:02<00:00]"
    assert outputs[1]["data"]["text/plain"] == "IntSlider()"  # not a progress bar: left as it is
    assert outputs[2]["data"]["text/plain"] == ""  # hidden, as a live notebook shows it
