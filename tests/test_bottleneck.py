"""The labelling rules at their thresholds: a wait, a slowdown or a copy is a cost from 10% of a step (as printed,
rounded), the largest cost names the bottleneck, an efficiency from 0.90 with no cost is compute-bound; how sure
follows how many readings agree (at least two thirds), the load and how close the deciding number is to its line.
And over a grid of measurements, no label contradicts the numbers printed beside it."""

from __future__ import annotations

import itertools

import pytest

from helpers.bottleneck import (
    COMPETES,
    COMPUTE_BOUND,
    INPUT_BOUND,
    TRANSFER_BOUND,
    Shares,
    classify,
    most_likely,
    reason_text,
    shares_text,
)


def _shares(wait_pct=0, slower_pct=0, copy_pct=None, efficiency=0.95, **ms) -> Shares:
    """Shares with the printed percentages given directly; each cost's ms defaults to its percentage."""
    values = dict(wait_ms=float(wait_pct), slower_ms=float(slower_pct), copy_ms=float(copy_pct or 0))
    return Shares(wait_pct, slower_pct, copy_pct, efficiency, **{**values, **ms})


@pytest.mark.parametrize(("pct", "label"), [(9, COMPUTE_BOUND), (10, INPUT_BOUND)])
def test_a_wait_is_a_cost_from_ten_percent(pct, label):
    assert classify(_shares(wait_pct=pct)) == label


@pytest.mark.parametrize(("pct", "label"), [(9, COMPUTE_BOUND), (10, COMPETES)])
def test_a_slowdown_is_a_cost_from_ten_percent(pct, label):
    assert classify(_shares(slower_pct=pct)) == label


@pytest.mark.parametrize(("pct", "label"), [(9, COMPUTE_BOUND), (10, TRANSFER_BOUND)])
def test_a_copy_is_a_cost_from_ten_percent(pct, label):
    assert classify(_shares(copy_pct=pct)) == label


@pytest.mark.parametrize(("efficiency", "label"), [(0.89, INPUT_BOUND), (0.90, COMPUTE_BOUND)])
def test_no_cost_and_an_efficiency_from_point_nine_is_compute_bound(efficiency, label):
    # below 0.90 the largest cost names it even under 10% (and the doubt says so)
    assert classify(_shares(wait_pct=5, slower_pct=3, efficiency=efficiency)) == label


def test_the_largest_cost_in_milliseconds_names_the_bottleneck():
    assert classify(_shares(wait_pct=12, slower_pct=30, wait_ms=12.1, slower_ms=12.0)) == INPUT_BOUND
    assert classify(_shares(wait_pct=12, slower_pct=30, wait_ms=11.9, slower_ms=12.0)) == COMPETES
    assert classify(_shares(wait_pct=20, copy_pct=15, wait_ms=5.0, copy_ms=15.0)) == TRANSFER_BOUND


def test_the_rule_reads_the_rounded_numbers_that_are_printed():
    # 9.6% waiting prints as 10%: it is a cost, never "compute-bound" beside "10% waits" (issue 31, 01 [19])
    shares = Shares.of(wait_ms=9.6, compute_ms=90.4, premade_ms=94.0)
    assert shares.wait_pct == 10 and classify(shares) == INPUT_BOUND
    assert "10% of each fed step waits for data" in shares_text(shares)
    below = Shares.of(wait_ms=9.4, compute_ms=90.6, premade_ms=94.0)
    assert below.wait_pct == 9 and classify(below) == COMPUTE_BOUND


def test_the_issue_31_readings():
    # 01 [19]: "COMPUTE-BOUND" beside "10% of each fed step waits" at a high efficiency
    assert classify(Shares.of(10.0, 90.0, 95.0, efficiency=0.96)) == INPUT_BOUND
    # 07 [21]: "INPUT-BOUND" beside "0% waits", where the step ran 19% slower beside its workers (16% of a fed step)
    seven = Shares.of(0.2, 119.0, 100.0)
    assert (seven.wait_pct, seven.slower_pct) == (0, 16) and classify(seven) == COMPETES


def test_every_cost_is_a_share_of_the_same_fed_step():
    # reader 3, 07 'whole-JPEG batch': a 114.5 ms wait beside a 113.4 ms slowdown read LOADER COMPETES, the slowdown
    # taken against the pre-made step (10.4%) and the wait against the fed step (8.7%)
    whole = Shares.of(114.5, 1203.5, 1090.1, efficiency=0.82)
    assert (whole.wait_pct, whole.slower_pct) == (9, 9) and classify(whole) == INPUT_BOUND
    assert "the step's slowdown beside the loader is 9% of each fed step" in shares_text(whole)
    assert "as fast beside the loader" in shares_text(Shares.of(73.2, 752.0, 755.5))  # 0.5% shorter is not "0% longer"


def test_how_sure_at_its_thresholds():
    clear = _shares(wait_pct=40, efficiency=0.6)
    assert most_likely(clear, [INPUT_BOUND] * 3).confidence == "sure"
    assert most_likely(clear, [INPUT_BOUND] * 3, busy_note="busy").confidence == "fairly sure"
    two_of_three = most_likely(clear, [INPUT_BOUND, INPUT_BOUND, COMPETES])
    assert two_of_three.confidence == "fairly sure" and "2 of 3 block pairs read input-bound (1 loader" in (
        two_of_three.how_sure()
    )
    assert most_likely(clear, [INPUT_BOUND, COMPETES, COMPETES]).confidence == "not sure"  # 1 of 3 < 2/3
    assert most_likely(clear, [INPUT_BOUND, INPUT_BOUND, COMPETES], busy_note="busy").confidence == "not sure"
    assert most_likely(clear, []).confidence == "not sure"  # nothing to agree


@pytest.mark.parametrize(("pct", "near"), [(14, True), (15, False)])
def test_a_deciding_number_under_one_and_a_half_times_its_line_is_close_to_it(pct, near):
    finding = most_likely(_shares(wait_pct=pct, efficiency=0.6), [INPUT_BOUND] * 3)
    assert (finding.confidence == "fairly sure") is near and ("close to the 10% line" in finding.how_sure()) is near


@pytest.mark.parametrize(("efficiency", "near"), [(0.94, True), (0.95, False)])
def test_compute_bound_close_to_point_nine_is_doubted(efficiency, near):
    finding = most_likely(_shares(efficiency=efficiency), [COMPUTE_BOUND] * 3)
    assert finding.label == COMPUTE_BOUND and (finding.confidence == "fairly sure") is near


def test_no_label_contradicts_the_numbers_printed_beside_it():
    steps = (0.0, 0.5, 4.0, 9.5, 10.0, 12.0, 40.0)
    for wait, extra, copy, efficiency in itertools.product(steps, steps, (None, 0.0, 5.0, 15.0), (0.5, 0.89, 0.9, 1.2)):
        shares = Shares.of(wait, 100.0 + extra, 100.0, efficiency=efficiency, copy_ms=copy)
        label = classify(shares)
        printed = {INPUT_BOUND: shares.wait_pct, COMPETES: shares.slower_pct, TRANSFER_BOUND: shares.copy_pct or 0}
        if label == COMPUTE_BOUND:  # "the input pipeline keeps up": nothing printed reaches the line
            assert all(value < 10 for value in printed.values()), shares
        else:  # a bottleneck is one whose printed cost is above zero, and the largest printed one where any is 10%+
            assert printed[label] > 0, shares
            if any(value >= 10 for value in printed.values()):
                assert printed[label] >= 10, shares


def test_each_label_gives_the_number_it_rests_on():
    shares = Shares.of(12.0, 119.0, 100.0, copy_ms=15.0)
    assert reason_text(INPUT_BOUND, shares) == "9% of each fed step waits for data"
    assert reason_text(COMPETES, shares) == "the step's slowdown beside the loader is 15% of each fed step"
    assert reason_text(TRANSFER_BOUND, shares) == "the copy takes 11% of a fed step"
    assert reason_text(COMPUTE_BOUND, shares) == "no cost of the loader reaches 10% of a step, at efficiency 0.76"
    assert reason_text(COMPETES, Shares.of(1.0, 1.0, 0.0)) == "nothing was measured to decide on"


def test_a_cost_the_loop_absorbs_says_how_close_to_the_pre_made_pace_it_kept():
    # reader 5, 01: "kept pace ... costs the loop little" beside an 11% wait at efficiency 0.93
    finding = most_likely(Shares.of(105.6, 888.6, 926.3), [INPUT_BOUND] * 3)
    assert "the fed steps kept within 7% of the pre-made pace all the same (efficiency 0.93)" in finding.how_sure()
    absorbed = most_likely(Shares.of(62.7, 426.6, 819.4, efficiency=1.30), [INPUT_BOUND] * 3)
    assert "the fed steps kept pace with pre-made ones all the same (efficiency 1.30)" in absorbed.how_sure()
