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


def test_pipelines_measured_in_the_same_blocks_compare_block_by_block():
    # reader 3, 05 and 08: blocks measured interleaved were compared lowest over highest, a range wide enough to tie
    def result(pooled, blocks):
        return PipelineResult(pooled, 2 * pooled, 0.5, 1.0, 9.0, 30, 100.0, None, fed_blocks=blocks)

    a, b = result(150.0, (145.0, 175.0, 150.0)), result(100.0, (108.0, 110.0, 89.0))
    ratio = a.fed.ratio(b.fed)
    assert a.fed.pairs_with(b.fed) and a.fed.median == 150.0  # the pooled rate, as printed
    assert (round(ratio.low, 3), round(ratio.high, 3)) == (1.343, 1.685)  # 145/108 and 150/89, not 145/110-175/89
    alone = PipelineResult(150.0, 300.0, 0.5, 1.0, 9.0, 30, 100.0, None, fed_samples_per_s_range=(145.0, 175.0))
    assert not alone.fed.pairs_with(b.fed)


def test_compute_measured_in_the_same_blocks_pairs_too():
    # reader 4, 08: "the GAN against the generator alone: 1.7x (range 1.28–2.32x)" was lowest over highest
    def result(compute, blocks):
        return PipelineResult(10.0, 20.0, 0.5, 1.0, compute, 30, 100.0, None, compute_blocks=blocks)

    gan, alone = result(275.9, (270.0, 318.7, 237.3)), result(160.8, (160.0, 184.7, 137.4))
    assert gan.compute.pairs_with(alone.compute) and gan.compute.median == 275.9
    ratio = gan.compute.ratio(alone.compute)
    assert round(ratio.low, 2) == 1.69 and round(ratio.high, 2) == 1.73  # round by round, not 1.28–2.32
