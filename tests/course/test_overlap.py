"""Lesson 04's overlap measurements: the slow-worker loader loses and repeats nothing, in_order=False gets ahead of a
straggler, and the verdict reads ranges like for like."""

from __future__ import annotations

from helpers.course.overlap import in_order_rows
from helpers.course.verdicts.gpu_augmentation import rows_against_first_verdict


def test_in_order_false_hands_over_the_fast_workers_batches_first():
    # worker 0 is 20x slower: in order, every other batch waits for it; out of order the fast worker's batches pass
    rows = in_order_rows(batches=12, rounds=1, batch_size=2, fast_s=0.001, slow_s=0.02)
    ordered, unordered = rows
    assert ordered["name"].startswith("in_order=True") and unordered["name"] == "in_order=False"
    assert ordered["order"] == list(range(12))
    assert unordered["order"] != list(range(12)) and sorted(unordered["order"]) == list(range(12))


def _row(name, median, low, high):
    return {"name": name, "batches_per_s": median, "range": (low, high), "rounds": 3, "note": ""}


def test_verdict_names_noise_when_ranges_overlap_and_a_winner_when_not():
    text = rows_against_first_verdict([_row("a", 10, 9, 11), _row("b", 10.5, 10.8, 12)], what="Copies")
    assert (
        "within the noise" in text
        and "no clear winner, this measurement cannot tell them apart" in text
        and "'b'" in text.split("fastest")[1]
    )
    text = rows_against_first_verdict([_row("a", 10, 9, 11), _row("b", 20, 19, 21)], what="Copies")
    assert "within the noise" not in text and "clear of every other row" in text
    assert "2.00x (1.73–2.33x)" in text
