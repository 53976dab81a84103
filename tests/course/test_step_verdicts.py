"""03's precision and channels_last verdicts read the ranges of interleaved timings: a ratio whose ranges overlap is
called within the noise, and the precision choice printed is the one made from the table's own timings."""

from __future__ import annotations

from helpers.course.verdicts.mixed_precision import channels_last_verdict, precision_verdict
from helpers.precision import choose_precision


def test_precision_verdict_gives_the_ratio_interval_and_the_choice_from_the_same_timings():
    times = {"fp32": [10.0, 11.0, 13.0], "bf16": [9.0, 10.0, 14.0]}  # round 3 reverses the order: a tie
    choice = choose_precision(times, device="cpu")
    results = [
        {
            "precision": p,
            "native": True,
            "step_ms": choice.step_ms[p],
            "step_ms_range": choice.step_ms_range[p],
            "times": times[p],
            "losses": [0.5, 0.4],
        }
        for p in times
    ]
    text = precision_verdict(results, device="cpu", choice=choice)
    assert "bf16 0.91x (less) the fp32 step time (range 0.90–1.08x over 3 paired rounds; within the noise)" in text
    assert "bf16, the fastest median, is within the noise of fp32: this measurement cannot tell them apart." in text
    assert text.endswith("The course keeps fp32, full precision, since bf16 is not measurably faster in these timings.")
    assert choice.within_noise and len(text.split()) <= 60


def test_channels_last_verdict_with_ranges_says_within_the_noise_only_when_they_overlap():
    clear = channels_last_verdict({("NCHW", "fp32"): [20.0, 21.0, 22.0], ("channels_last", "fp32"): [9.0, 10.0, 11.0]})
    assert (
        "NCHW step 2.1x the channels_last step (range 2.00–2.22x over 3 paired rounds) (channels_last faster)" in clear
    )
    assert "noise" not in clear
    slower = channels_last_verdict({("NCHW", "fp32"): [9.0, 9.5], ("channels_last", "fp32"): [12.0, 13.0]})
    assert "(NCHW faster)" in slower and "channels_last faster" not in slower  # said plainly, either way round
    noisy = channels_last_verdict({("NCHW", "fp32"): [9.0, 12.0, 20.0], ("channels_last", "fp32"): [10.0, 11.0, 15.0]})
    assert "within the noise" in noisy and "cannot tell 'NCHW' and 'channels_last' apart" in noisy
    assert "the course keeps 'channels_last'" in noisy and "faster)" not in noisy
    assert "1.3x the" in channels_last_verdict({("NCHW", "fp32"): 13.0, ("channels_last", "fp32"): 10.0})


def test_a_precision_faster_in_every_round_is_chosen_and_called_so_though_the_ranges_overlap():
    times = {"fp32": [10.0, 11.0, 15.0], "bf16": [8.0, 9.0, 12.0]}
    choice = choose_precision(times, device="cpu")
    results = [
        {"precision": p, "native": True, "step_ms": choice.step_ms[p], "times": times[p], "losses": [0.5]}
        for p in times
    ]
    text = precision_verdict(results, device="cpu", choice=choice)
    assert choice.precision == "bf16" and "within the noise" not in text and "cannot tell" not in text
    assert "(range 0.80–0.82x over 3 paired rounds)" in text
