"""The measuring instruments: pipeline efficiency, data-wait, peak memory (the doctor's verdicts: test_doctor.py)."""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn

from helpers.measure import (
    PipelineResult,
    measure_pipeline,
    measure_pipelines,
    peak_rss_bytes,
    reset_peak_rss,
)


class SlowLoader:
    """Batches that take `delay` seconds each to produce: an input-bound pipeline by construction."""

    def __init__(self, delay: float, batches: int = 4) -> None:
        self.delay, self.batches = delay, batches

    def __iter__(self):
        for _ in range(self.batches):
            time.sleep(self.delay)
            yield torch.zeros(4, 3), torch.zeros(4, 1)


def _step():
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(batch):
        x, y = batch
        optimizer.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()

    return step


def test_a_sleeping_loader_shows_its_wait():
    result = measure_pipeline(SlowLoader(0.02), _step(), torch.device("cpu"), steps_per_block=3, blocks=2)
    assert result.steps == 6 and result.data_wait_ms >= 15  # it slept 20 ms per batch
    assert result.pipeline_efficiency < 0.5  # a tiny step cannot hide 20 ms of waiting


def test_pipelines_measured_side_by_side_keep_their_names_ranges_and_data_wait():
    results = measure_pipelines({"slow": (SlowLoader(0.02), _step()), "ready": (SlowLoader(0.0), _step())},
                                torch.device("cpu"), budget_s=0.6, blocks=3)  # fmt: skip
    slow, ready = results["slow"], results["ready"]
    assert list(results) == ["slow", "ready"]
    assert slow.data_wait_ms >= 15 and ready.data_wait_ms < 5  # the 20 ms delay shows up only where it is
    low, high = slow.samples_per_s_range
    assert low <= high and slow.efficiency_range is not None and slow.pipeline_efficiency < 0.5


def test_the_undisturbed_step_time_is_measured():
    result = measure_pipeline(SlowLoader(0.0), _step(), torch.device("cpu"), steps_per_block=3, blocks=2)
    assert result.premade_step_ms is not None and 0 < result.premade_step_ms < 1000


def test_the_wait_fraction_is_the_wait_over_the_whole_step():
    result = PipelineResult(95.0, 97.0, 0.98, 0.5, 40.0, 10, 100.0, None)
    assert abs(result.data_wait_fraction - 0.5 / 40.5) < 1e-9


def test_peak_rss_sees_a_large_allocation():
    reset_peak_rss()
    before = peak_rss_bytes()
    block = np.ones(200 * 2**20, dtype=np.uint8)  # 200 MiB, touched
    after = peak_rss_bytes()
    assert before is not None and after - before > 150 * 2**20
    del block


def test_steps_in_budget_and_seconds_per_call():
    from helpers.measure import seconds_per_call, steps_in_budget

    assert steps_in_budget(10, 0.3) == 33 and steps_in_budget(1, 5) == 1 and steps_in_budget(10, 0.1, maximum=50) == 50
    assert 0.015 <= seconds_per_call(lambda: time.sleep(0.02), calls=2) < 0.5
