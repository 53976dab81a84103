"""The plots that carry a lesson's model: min(loader, step) beside the fed rate, and a profiler trace drawn."""

from __future__ import annotations

import json

import matplotlib
import pytest

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from helpers.course.plots import (  # noqa: E402
    plot_cpu_budget,
    plot_min_model,
    plot_precisions,
    plot_timeline,
    plot_trace,
    show_image_grid,
)
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


def test_a_grid_title_sits_above_every_image_title():
    images = [np.zeros((32, 32, 3), dtype=np.uint8)] * 6
    figure = show_image_grid(images, [f"LR {i}\nline two" for i in range(6)], columns=6, cell_inches=2.2, title="crops")
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    top = max(axis.title.get_window_extent(renderer).y1 for axis in figure.axes)
    assert figure._suptitle.get_window_extent(renderer).y0 >= top


def test_every_sweep_setting_is_drawn_and_precision_bars_are_linear():
    def row(workers, prefetch):
        rate = 100.0 + workers + 10 * (prefetch or 2)
        return dict(
            num_workers=workers,
            intra_op_threads=1,
            pin_memory=False,
            prefetch_factor=prefetch,
            samples_per_s=rate,
            runs=[rate - 1, rate + 1],
            compute_ms=10.0,
            compute_runs=[9.0, 11.0],
        )

    rows = [row(0, None), row(1, 2), row(2, 2), row(1, 4)]
    figure = plot_cpu_budget(rows, cores=2)
    rate_axis = figure.axes[0]
    drawn = {tuple(xy) for c in rate_axis.collections for xy in np.atleast_2d(c.get_offsets()) if len(xy)}
    line = {tuple(xy) for drawn_line in rate_axis.get_lines() for xy in drawn_line.get_xydata()}
    assert all((r["num_workers"], r["samples_per_s"]) in drawn | line for r in rows)
    assert any("prefetch 4" in t.get_text() for t in rate_axis.texts)
    results = [
        dict(precision=p, native=True, step_ms=ms, extra_mib=0.0, losses=[1.0, 0.5])
        for p, ms in (("fp32", 30.0), ("bf16", 19.0))
    ]
    assert plot_precisions(results, memory=False).axes[0].get_yscale() == "linear"


def test_a_wait_too_short_to_see_as_a_bar_gets_a_tick():
    from matplotlib.collections import LineCollection

    rows = [dict(start_s=i * 0.04, wait_s=0.001 if i % 3 else 0.0, compute_s=0.035) for i in range(30)]
    figure = plot_timeline({"fed": rows})
    ticks = [c for c in figure.axes[0].collections if isinstance(c, LineCollection)]
    assert sum(len(c.get_segments()) for c in ticks) == 20  # one per step that waited at all
