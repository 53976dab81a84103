"""A median with its range and the words for it (helpers.spread): the one home of "a value with its range", "a ratio
with its range, within the noise when the ranges overlap" and "an efficiency above 1 is noise", which measure, the
doctor, precision, the ladders and the course's verdicts all print."""

from __future__ import annotations

import pytest

from helpers.spread import WITHIN_NOISE, Spread, _bound, compare_text, efficiency_text, ratio_spread_text, ratio_text


def test_a_spread_is_the_median_lowest_highest_and_count_of_its_values():
    assert Spread.of([3.0, 1.0, 2.0, 10.0]) == Spread(2.5, 1.0, 10.0, 4)
    assert Spread.of([7.0]).range == (7.0, 7.0) and Spread.of([7.0]).n == 1
    with pytest.raises(ValueError, match="at least one measurement"):
        Spread.of([])


def test_a_recorded_range_or_none_and_a_single_value():
    assert Spread.around(5.0, (4.0, 6.0), 3) == Spread(5.0, 4.0, 6.0, 3)
    assert Spread.around(5.0, None) == Spread.single(5.0) == Spread(5.0, 5.0, 5.0, 1)


def test_the_text_shows_the_range_unless_there_was_one_measurement():
    assert Spread(400.4, 380.0, 419.6, 5).text() == "400 (380–420)"
    assert Spread(35.5, 35.0, 36.04, None).text(1, unit="ms") == "35.5 ms (35.0–36.0)"
    assert Spread.single(52.0).text(1, unit="ms") == "52.0 ms"
    assert Spread(4.0, 4.0, 4.0, None).text() == "4 (4–4)"  # a range kept without its count is shown


def test_ranges_that_touch_overlap_and_apart_ones_do_not():
    low, touching, apart = Spread(1.5, 1.0, 2.0), Spread(2.5, 2.0, 3.0), Spread(2.5, 2.01, 3.0)
    assert low.overlaps(touching) and touching.overlaps(low)
    assert not low.overlaps(apart) and not apart.overlaps(low)


def test_a_ratio_runs_from_lowest_over_highest_to_highest_over_lowest():
    ratio = Spread(20.0, 18.0, 22.0).ratio(Spread(10.0, 9.0, 11.0))
    assert ratio.median == 2.0 and ratio.low == pytest.approx(18 / 11) and ratio.high == pytest.approx(22 / 9)
    assert Spread(30.0, 25.0, 35.0, 4).per(5) == Spread(6.0, 5.0, 7.0, 4)


def test_a_ratio_reads_as_a_reader_says_it_and_never_1_00x_less():
    assert ratio_text(3.24) == "3.2x" and ratio_text(0.6) == "0.60x (less)"
    assert ratio_text(0.996) == "1.0x" and ratio_text(0.994) == "0.99x (less)"


def test_one_value_against_another_carries_the_range_of_the_ratio():
    assert compare_text(Spread(20.0, 18.0, 22.0), Spread(10.0, 9.0, 11.0)) == "2.0x (range 1.64–2.44x)"
    tied = compare_text(Spread(10.5, 9.5, 12.0), Spread(10.0, 9.0, 11.0))
    assert tied == f"{WITHIN_NOISE}: measured 1.1x (range 0.86–1.33x)"
    assert compare_text(Spread.single(4.15), Spread.single(1.0)) == "4.2x (one measurement each: no range)"


def test_a_ratio_is_never_printed_outside_its_own_range():
    # 22.3 against 21.1 is 1.057: "1.1x" would sit above its range 1.03-1.09x, so it is printed with two places
    text = compare_text(Spread(22.3, 22.0, 22.6), Spread(21.1, 20.8, 21.4))
    assert text == "1.06x (range 1.03–1.09x)", text
    assert compare_text(Spread(2.0, 1.8, 2.2), Spread(1.0, 0.9, 1.1)).startswith("2.0x (range")  # one place suffices


def test_an_efficiency_above_one_never_stands_as_a_number():
    assert efficiency_text(Spread(1.38, 0.9, 1.5)) == "1.0 within the noise (measured 1.38, 0.90–1.50)"
    assert efficiency_text(Spread(1.02, 0.98, 1.05)).startswith("1.0 within the noise")
    assert efficiency_text(Spread(0.99, 0.98, 1.06)) == "0.99 (0.98–1.0 within the noise; highest block measured 1.06)"
    assert efficiency_text(Spread(0.5, 0.4, 0.6)) == efficiency_text(Spread(0.5, 0.4, 0.6), short=True)
    assert efficiency_text(Spread(0.5, 0.4, 0.6)) == "0.50 (0.40–0.60)"


def test_a_range_wholly_above_one_is_a_biased_baseline_not_noise():
    for short in (False, True):
        text = efficiency_text(Spread(1.10, 1.03, 1.13), short=short)
        assert text.startswith("1.0 at most (measured 1.10") and "biased baseline" in text, text
        assert "noise" not in text.replace("rather than noise", "")


def test_a_table_cell_says_the_same_in_fewer_words():
    assert efficiency_text(Spread(1.38, 0.9, 1.58), short=True) == "1.0 within noise (measured 1.38; 0.90–1.58)"
    assert efficiency_text(Spread(1.0, 0.2, 1.5), short=True) == "1.00 (0.20–1.0 within noise; max 1.50)"


class TestTheOneNoiseRule:
    """Within the noise exactly when the ratio's range reaches 1: round by round for spreads measured in the same
    interleaved rounds, from the two ranges otherwise."""

    def test_ranges_that_overlap_tie_unless_every_round_shows_the_same_side(self):
        a, b = [500.0, 310.0, 530.0, 480.0], [300.0, 320.0, 340.0, 290.0]  # a's slow round overlaps b's range
        assert Spread.of(a).ties(Spread.of(b))  # unpaired: the ranges overlap
        assert Spread.paired(a).ties(Spread.paired(b))  # round 2 has a below b: the paired range reaches 1
        a[1] = 330.0
        assert not Spread.paired(a).ties(Spread.paired(b)) and Spread.of(a).ties(Spread.of(b))

    def test_the_threshold_is_one_itself(self):
        at_one = Spread.paired([100.0, 100.0, 120.0])
        assert at_one.ties(Spread.paired([100.0, 90.0, 100.0]))  # round 1 is exactly 1.0x: a tie
        assert not at_one.ties(Spread.paired([99.0, 90.0, 100.0]))  # every round above 1: a difference
        assert compare_text(at_one, Spread.paired([99.0, 90.0, 100.0])).endswith("over 3 paired rounds)")

    def test_the_shown_ratio_is_the_ratio_of_the_medians_and_its_range_holds_it(self):
        ratio = Spread.paired([10.0, 30.0, 20.0]).ratio(Spread.paired([10.0, 10.0, 20.0]))
        assert ratio.median == 2.0 and ratio.low <= 2.0 <= ratio.high and ratio.n == 3

    def test_rounds_of_other_lengths_or_one_round_do_not_pair(self):
        assert not Spread.paired([1.0, 2.0]).pairs_with(Spread.paired([1.0, 2.0, 3.0]))
        assert not Spread.paired([1.0]).pairs_with(Spread.paired([2.0]))
        assert Spread.paired([1.0, 2.0]) == Spread.of([1.0, 2.0])  # the rounds do not change what a spread is


def test_a_spread_per_batch_keeps_its_rounds_so_it_still_pairs():
    a, b = Spread.paired([10.0, 20.0, 30.0]), Spread.paired([12.0, 18.0, 33.0])
    assert a.per(2).pairs_with(b.per(2)) and a.per(2).rounds == (5.0, 10.0, 15.0)
    assert a.per(2).ratio(b.per(2)) == a.ratio(b)


def test_a_range_end_next_to_one_shows_which_side_it_lies_on():
    # reader 3: "1.1x (range 1.00–1.26x)" was not within the noise: its low end was 1.003
    assert "(range 1.003–1.26x)" in ratio_spread_text(Spread(1.1, 1.003, 1.26))
    assert efficiency_text(Spread(0.98, 0.93, 0.998)) == "0.98 (0.93–0.998)"
    assert "(range 0.95–1.05x)" in ratio_spread_text(Spread(1.0, 0.95, 1.05)) and _bound(1.0) == "1.00"
