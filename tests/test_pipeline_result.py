"""What measuring a loader feeding a step gives (pipeline_result.py): the share of a fed step spent waiting, and the
names the fed and pre-made numbers had before, still read."""

from __future__ import annotations

from helpers.pipeline_result import PipelineResult


def test_the_wait_fraction_is_the_wait_over_the_whole_step():
    result = PipelineResult(95.0, 97.0, 0.98, 0.5, 40.0, 10, 100.0, None)
    assert abs(result.data_wait_fraction - 0.5 / 40.5) < 1e-9


def test_the_older_names_read_the_fed_and_pre_made_numbers():
    result = PipelineResult(95.0, 97.0, 0.98, 0.5, 40.0, 10, 100.0, None, fed_samples_per_s_range=(90.0, 99.0))
    assert (result.samples_per_s, result.ideal_samples_per_s, result.samples_per_s_range) == (95.0, 97.0, (90.0, 99.0))


def test_a_step_that_took_no_time_waits_no_share_of_it():
    assert PipelineResult(1.0, 1.0, 1.0, 0.0, 0.0, 1, 1.0, None).data_wait_fraction == 0.0
