"""The plots that carry a lesson's model: min(loader, step) beside the fed rate, and a profiler trace drawn."""

from __future__ import annotations

import json

import matplotlib
import pytest

matplotlib.use("Agg")

from helpers.course.plots import plot_min_model, plot_trace  # noqa: E402
from tests.course.test_verdicts import _ladder_row  # noqa: E402


def test_the_min_model_draws_four_bars_per_rung_on_a_log_axis():
    rows = [_ladder_row("lazy", 600, 151, 300, 0.5), _ladder_row("cache", 30000, 241, 250, 0.96)]
    axes = plot_min_model(rows, "ladder").axes[0]
    assert len(axes.patches) == 4 * len(rows) and axes.get_xscale() == "log"
    predicted = [p.get_width() for p in axes.containers[2]]
    assert predicted == [300, 250]  # min(loader alone, pre-made) per rung


def test_a_trace_is_drawn_range_by_range_and_a_foreign_one_is_named(tmp_path):
    events = [
        {"ph": "X", "name": "fetch", "ts": 1000, "dur": 500},
        {"ph": "X", "name": "step", "ts": 1500, "dur": 2000},
        {"ph": "X", "name": "aten::mm", "ts": 1600, "dur": 10},
    ]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    axes = plot_trace(str(trace)).axes[0]
    bars = {label.get_text(): i for i, label in enumerate(axes.get_yticklabels())}
    assert set(bars) == {"fetch", "copy", "step"} and len(axes.collections) == 3
    assert axes.collections[bars["step"]].get_paths()  # the step's range is drawn
    trace.write_text(json.dumps({"traceEvents": events[2:]}))
    with pytest.raises(ValueError, match="trace.json: no ranges named"):
        plot_trace(str(trace))
