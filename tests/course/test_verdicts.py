"""Verdicts say what the numbers say, including when the numbers contradict what a lesson might have expected."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import torch

from helpers.course.ladder_row import LadderRow
from helpers.course.verdicts.gpu_augmentation import augmentation_claim_verdict, loader_pair_verdict
from helpers.course.verdicts.ladder import ladder_verdict
from helpers.course.verdicts.lazy_crop_dataset import (
    decode_verdict,
    file_format_verdict,
    layout_verdict,
    reopen_verdict,
    seed_claim_verdict,
    wait_verdict,
)
from helpers.course.verdicts.mixed_precision import channels_last_verdict, precision_verdict
from helpers.course.verdicts.naive_loader import doctor_change_verdict, memory_verdict
from helpers.course.verdicts.scaling_out import gan_verdict, rank_reads_verdict
from helpers.course.verdicts.setup_and_data import census_verdict
from helpers.course.verdicts.sweep import sweep_ladder_verdict, sweep_verdict
from helpers.course.verdicts.text import compare, cores_used, efficiency_verdict
from helpers.course.verdicts.train_resnet18_cifar10 import accuracy_verdict, same_steps_verdict
from helpers.course.verdicts.train_super_resolution import (
    batch_layout,
    pipelines_claim_verdict,
    pipelines_table_notes,
    sr_verdict,
)
from helpers.course.verdicts.your_own_images import reduction_text
from helpers.pipeline_result import PipelineResult
from helpers.spread import Spread


def _sweep_row(workers, rate, runs=None, prefetch=2, threads=None, compute=None):
    row = {
        "num_workers": workers,
        "prefetch_factor": prefetch if workers else None,
        "pin_memory": False,
        "samples_per_s": rate,
        "runs": runs or [rate],
        "intra_op_threads": threads,
    }
    if compute is not None:
        row.update(mode="end to end", compute_ms=compute, compute_runs=[compute], data_wait_ms=1.0)
    return row


def test_sweep_verdict_reports_a_peak_past_the_core_count():
    # the contradiction a reader found: the best setting had 4 workers on 2 cores, and prose said "flattens at cores"
    rows = [_sweep_row(0, 12), _sweep_row(1, 30), _sweep_row(2, 55), _sweep_row(4, 61)]
    text = sweep_verdict(rows, cores=2)
    assert "4 workers" in text and "more workers than cores" in text and "flatten" not in text


def test_sweep_verdict_never_compares_the_best_setting_with_itself():
    # the busy run's "0 workers, 1 intra-op thread: 346 samples/s, 1.0x the 346 of 0 workers, 1 intra-op thread"
    rows = [_sweep_row(0, 346, threads=1), _sweep_row(1, 300, threads=1), _sweep_row(2, 280, threads=1)]
    text = sweep_verdict(rows, cores=2)
    assert "1.0x" not in text and "the 346 of" not in text, text
    assert "faster (by median) than every setting with workers" in text, text
    assert "0 worker(s) + 1 intra-op thread(s) on 2 cores" in text, text
    faster = sweep_verdict([_sweep_row(0, 12, threads=1), _sweep_row(2, 55, threads=1)], cores=2)
    assert "the 12 of" in faster and "2 worker(s) + 1 intra-op thread(s)" in faster, faster


def test_sweep_verdict_names_settings_within_the_noise():
    # repeat 2 reverses 2 and 4 workers: within the noise, compared repeat by repeat
    rows = [_sweep_row(0, 12, [11, 13]), _sweep_row(2, 55, [50, 60]), _sweep_row(4, 56, [56, 56])]
    text = sweep_verdict(rows, cores=2)
    assert "1 other setting(s) are within its noise over 2 repeats" in text and "fewest workers among them 2" in text
    rows[2]["runs"] = [52, 63]  # faster in each repeat, though the ranges overlap: a difference
    assert "within its noise" not in sweep_verdict(rows, cores=2)


def _ladder_row(name, alone, fed, premade, efficiency, note="", role=None, spread=0.02, **extra):
    def span(v):
        return (v * (1 - spread), v * (1 + spread))

    numbers = {
        "name": name,
        "role": role or name,
        "model_note": note,
        "threads": 1,
        "loader_samples_per_s": alone,
        "loader_samples_per_s_range": span(alone),
        "fed_samples_per_s": fed,
        "fed_samples_per_s_range": span(fed),
        "premade_samples_per_s": premade,
        "premade_samples_per_s_range": span(premade),
        "pipeline_efficiency": efficiency,
        "efficiency_range": (efficiency - 0.01, min(efficiency + 0.01, 1.0)),
        "data_wait_ms": 1.0,
        "compute_ms": 2.0,
        "premade_step_ms": 2.0,
        "rounds": 3,
        "steps_per_turn": 1,
    }
    return LadderRow(**{**numbers, **extra})


def test_sweep_verdict_shows_oversubscription_at_the_same_thread_count():
    rows = [
        _sweep_row(0, 40, [38, 42], threads=2, compute=20.0),
        _sweep_row(2, 35, [33, 36], threads=2, compute=41.0),
        _sweep_row(0, 25, [24, 26], threads=1, compute=35.0),
        _sweep_row(1, 50, [48, 52], threads=1, compute=36.0),
        _sweep_row(2, 45, [44, 47], threads=1, compute=52.0),
    ]
    rows[4]["compute_runs"] = [50.0, 52.0, 55.0]  # every repeat's compute counts, not one median per setting
    text = sweep_verdict(rows, cores=2)
    assert text.startswith("End to end") and "1 worker, 1 intra-op thread, prefetch 2: 50 samples/s" in text
    assert (
        "with 1 thread, 35.5 ms (35.0–36.0 over 2 runs) per step within the cores against 52.0 ms (50.0–55.0 over 3 "
        "runs) past them: slower" in text
    )
    # one run on each side: no range, so no verdict either way
    assert (
        "with 2 threads, 20.0 ms (one run: no range) per step within the cores against 41.0 ms (one run: no range) "
        "past them: one run each, so no range to tell them apart by" in text
    )
    rows[4]["compute_runs"] = [34.0, 52.0]
    assert "past them: this run cannot tell them apart" in sweep_verdict(rows, cores=2)


def test_sweep_verdict_tests_two_to_four_times_the_cores():
    fewer = [_sweep_row(0, 10, [9, 11]), _sweep_row(2, 50, [48, 52])]
    assert "is not supported here: 2 workers" in sweep_verdict(fewer + [_sweep_row(4, 30, [29, 31])], cores=2)
    assert "(4 workers, torch's threads, prefetch 2, 30 samples/s (29–31)) 1.67x (range 1.66–1.68x over 2 paired" in (
        sweep_verdict(fewer + [_sweep_row(4, 30, [29, 31])], cores=2)
    )  # the ratio the claim rests on, with its range
    assert "is supported here: 8 workers" in sweep_verdict(fewer + [_sweep_row(8, 70, [66, 72])], cores=2)
    assert "is within the noise here" in sweep_verdict(fewer + [_sweep_row(4, 51, [49, 51])], cores=2)
    assert "is untested here: no setting had 4–8 workers" in sweep_verdict(fewer, cores=2)


def test_sweep_and_ladder_agree_or_say_what_differs():
    sweep = [_sweep_row(0, 100, [95, 105], threads=2), _sweep_row(2, 60, [58, 62], prefetch=4, threads=1)]
    ladder = [  # rungs measured without a range of their own fed rate, with the ladder's threads
        _ladder_row(
            name, 1000, fed, 200, 0.5, rounds=5, steps_per_turn=7, threads=2, fed_samples_per_s_range=(fed, fed)
        )
        for name, fed in (("plain", 101), ("tuned", 90))
    ]
    pairs = [("plain", {"num_workers": 0}), ("tuned", {"num_workers": 2, "prefetch_factor": 4})]
    text = sweep_ladder_verdict(sweep, ladder, pairs=pairs, ladder_threads=2)
    assert "'plain' 101 (101–101) against 100 samples/s (95–105): within the noise" in text
    assert "'tuned' 90 (90–90) against 60 samples/s (58–62): the sweep measured 0.67x (less) the ladder's rate" in text
    assert "measure differently" in text and "with 1 intra-op thread against 2" in text
    assert "measure differently" not in sweep_ladder_verdict(sweep, ladder, pairs=pairs[:1], ladder_threads=2)


def test_ladder_verdict_compares_end_to_end_only_among_rungs_with_the_same_model():
    rows = [
        _ladder_row("traditional", 100, 12, 14, 0.89, note="HR-size inputs", role="seed post"),
        _ladder_row("lazy", 600, 151, 300, 0.50),
        _ladder_row("cache", 30000, 241, 250, 0.96),
    ]
    text = ladder_verdict(rows)
    # the efficient-looking traditional rung is not in it; the fastest is set against the next, not the slowest
    assert "End to end on the same model, the fastest, 'cache', against 'lazy': 1.6x (range 1.53–1.66x)." in text
    assert "'seed post' 12" not in text and "End to end on the same model, the fastest, 'seed post'" not in text
    assert "Loader alone, the fastest, 'cache', against 'seed post': 300.0x (range 288.24–312.24x)." in text
    assert len(text.split()) <= 60  # the table beside it holds the rest


def test_every_ladder_ratio_carries_its_range_and_rows_are_found_by_role_not_position():
    rows = [
        _ladder_row("lazy", 600, 151, 300, 0.50),
        _ladder_row("cache", 30000, 241, 250, 0.96),
        _ladder_row("traditional", 100, 12, 14, 0.89, note="HR-size inputs", role="seed post"),
    ]
    text = ladder_verdict(rows)
    assert text.startswith("Loader alone, the fastest, 'cache', against 'seed post':")  # wherever it stands
    for ratio in ("300.0x", "1.6x"):
        assert f"{ratio} (range " in text, ratio
    try:
        ladder_verdict(rows, first="native size")
    except KeyError as error:
        assert "native size" in str(error) and "seed post" in str(error)
    else:
        raise AssertionError("a missing role must raise")


def test_seed_claim_verdict_compares_end_to_end_with_end_to_end():
    rows = [
        _ladder_row("traditional", 100, 12, 14, 0.89, note="HR-size inputs", role="seed post"),
        _ladder_row("memory", 150, 13, 14, 0.9, note="HR-size inputs", role="in memory"),
        _ladder_row("lazy", 600, 151, 300, 0.50, role="lazy crop"),
    ]
    text = seed_claim_verdict(rows, claimed_before=18, claimed_after=25)
    assert "12.6x (range" in text and "1.4x" in text and "this mixes loader and model" in text
    # like for like first: the loaders alone (600/100); then end to end, which mixes loader and model; then the
    # post's claim on its own
    like_for_like = text[: text.index(". ")]
    assert "'lazy crop' against 'seed post': 6.0x (range 5.76–6.24x)" in like_for_like
    assert text.index("6.0x") < text.index("End to end") < text.index("12.6x") < text.index("The post reported")
    assert len(text.split()) <= 60


def test_overlapping_ranges_read_within_the_noise_and_say_the_measurement_cannot_tell_them_apart():
    rows = [
        _ladder_row(
            "plain",
            1000,
            200,
            210,
            0.95,
            role="seed post",
            loader_samples_per_s_range=(900, 1100),
            fed_samples_per_s_range=(190, 215),
            efficiency_range=(0.9, 0.99),
        ),
        _ladder_row(
            "tuned",
            1050,
            205,
            200,
            1.02,
            loader_samples_per_s_range=(950, 1150),
            fed_samples_per_s_range=(195, 210),
            efficiency_range=(0.97, 1.06),
        ),
    ]
    text = ladder_verdict(rows)
    assert (
        "'tuned', against 'seed post': within the noise of this machine: measured 1.1x (range 0.86–1.28x); this "
        "measurement cannot tell 'tuned' and 'seed post' apart on this machine" in text
    )
    assert "the fastest, 'tuned', against 'seed post': within the noise of this machine" in text
    assert "would pick" not in text and "best" not in text


def test_an_efficiency_above_one_never_stands_as_a_number():
    # the words are the library's (helpers.spread, tests/test_spread.py); the verdict adds whether it keeps pace
    assert efficiency_verdict(Spread(1.38, 0.9, 1.58)) == "1.0 within the noise (measured 1.38, 0.90–1.58)"
    assert efficiency_verdict(Spread(1.38, 1.1, 1.58)).endswith("a biased baseline rather than noise)")
    within = efficiency_verdict(Spread(0.97, 0.95, 1.04))
    assert within == (
        "0.97 (0.95–1.0 within the noise; highest block measured 1.04), as fast as pre-made batches within the noise"
    )


def test_one_lucky_block_does_not_make_a_rung_as_fast_as_pre_made_batches():
    # the contradiction a reader found: a rung waiting 14% of each step (median 0.85) reached 1.08 in one block
    text = efficiency_verdict(Spread(0.85, 0.84, 1.08))
    assert text == "0.85 (0.84–1.0 within the noise; highest block measured 1.08)"
    assert efficiency_verdict(Spread(0.85, 0.8, 0.9)) == "0.85 (0.80–0.90)"


def _cifar_rows(ceiling_fed=2600.0, ceiling_alone=30000.0):
    return [
        _ladder_row("post", 700, 28, 31, 0.9, role="seed post"),
        _ladder_row("pil32", 1800, 600, 1700, 0.37, role="native size"),
        _ladder_row("kornia", 20000, 2495, 2500, 1.0, role="device"),
        _ladder_row("ceiling", ceiling_alone, ceiling_fed, 2600, 0.99, role="ceiling", bounds="device"),
    ]


def test_a_ceiling_that_measures_slower_than_what_it_bounds_is_noise_not_a_ranking():
    # the contradiction a reader found: the ceiling fed 1,104 samples/s against 2,495 for the rung it bounds, and the
    # verdict called the augmented one "2.3x the next"
    text = ladder_verdict(_cifar_rows(ceiling_fed=1104), first="native size")
    assert (
        "The ceiling 'ceiling' measured slower than 'device', which it bounds (end to end 1104 against 2495 "
        "samples/s): this machine's noise, not a ranking." in text
    )
    assert "the fastest, 'device', against 'native size'" in text and "'ceiling' 1104" not in text
    fine = ladder_verdict(_cifar_rows(), first="native size")
    assert "measured slower" not in fine and "the fastest, 'ceiling', against 'device'" in fine


def test_a_busy_block_says_so_in_the_verdict_and_the_table():
    from helpers.course.ladder import ladder_table

    rows = _cifar_rows()
    rows[2].load_note = "other processes used 0.8 of 2 cores during this measurement"
    rows[2].load = {"other_cores": 0.8, "cores": 2, "busy": True}
    assert ladder_verdict(rows, first="native size").endswith(" Busy machine: other processes used 0.8 of 2 cores.")
    table = ladder_table(rows)
    assert (
        "measured on a busy machine: other processes used 0.8 of 2 cores during the measurements of 'kornia'" in table
        and "'post'" not in table.split("busy machine")[1]
    )
    for row in rows:
        row.load_note, row.load = "busy", {"other_cores": row.pipeline_efficiency, "cores": 2, "busy": True}
    assert "other processes used 0.4–1.0 of 2 cores during the measurements of every rung" in ladder_table(rows)
    quiet = [dataclasses.replace(row, load_note="") for row in rows]
    assert "busy" not in ladder_table(quiet) and "busy" not in ladder_verdict(quiet, first="native size")


def test_augmentation_claim_verdict_compares_like_for_like_first_and_says_no_gpu_was_measured():
    rows = _cifar_rows()
    rows[2].loader_samples_per_s = 20000
    text = augmentation_claim_verdict(rows, claimed_ratio=32, device="cpu")
    assert "measured no GPU" in text and "decode + augment" in text
    assert text.index("11.1x (range") < text.index("28.6x (range")  # same 32 px before the post's 224-px pipeline
    on_gpu = augmentation_claim_verdict(rows, claimed_ratio=32, device="cuda:0")
    assert "measured no GPU" not in on_gpu and "on cuda:0" in on_gpu


def test_loader_pair_verdict_gives_the_ratio_with_its_range_or_the_noise():
    apart = loader_pair_verdict([("cpu crops", [100, 110, 90]), ("device", [400, 420, 380])], device="cpu")
    assert "4.0x (range 3.82–4.22x over 3 paired rounds)" in apart and "within the noise" not in apart
    close = loader_pair_verdict([("cpu crops", [100, 110, 90]), ("device", [105, 105, 95])], device="cpu")
    assert "within the noise of this machine" in close and "cannot tell 'device' and 'cpu crops' apart" in close


def test_same_steps_verdict_names_everything_the_two_set_ups_differ_in():
    text = same_steps_verdict(
        post_rates=[2.0, 2.2, 1.9],
        course_rates=[30.0, 28.0, 31.0],
        post_px=224,
        course_px=32,
        post_batch=8,
        course_batch=32,
        same_network=False,
    )
    assert (
        "15.0x (range 12.73–16.32x over 3 paired rounds)" in text
        and "ImageNet stem" in text
        and "batch (8 against 32)" in text
        and "49x the pixels" in text
    )
    assert "not the loader's alone" in text and "3.1x the positions" in text  # (224/4)^2 against 32^2


def test_memory_verdict_says_more_than_the_claim_when_it_is():
    rows = [{"scale": 4, "traditional_mib": 700, "cache_mib": 125, "total_ratio": 5.6, "input_ratio": 64}]
    text = memory_verdict(rows, claimed_input_ratio=16)
    assert "700 MiB against 125 MiB" in text and "64x" in text and "more than the 16x claimed" in text


def test_precision_verdict_marks_emulated_precisions_and_leaves_the_losses_to_the_table():
    results = [
        {"precision": "fp32", "native": True, "step_ms": 66.0, "losses": [0.5, 0.4, 0.3, 0.2]},
        {"precision": "bf16", "native": False, "step_ms": 564.0, "losses": [0.5, 0.41, 0.31]},
    ]
    text = precision_verdict(results, device="cpu")
    assert text == "On cpu: bf16 8.5x the fp32 step time, not native here (emulated or reference kernels)."


def _result(compute, wait, rate, spread=0.02, busy=False):
    from helpers.loadmeter import LoadReading

    def span(v):
        return (v * (1 - spread), v * (1 + spread))

    load = LoadReading(0.8 if busy else 0.0, 2, 1.0)
    return PipelineResult(
        fed_samples_per_s=rate,
        premade_samples_per_s=rate,
        pipeline_efficiency=1.0,
        data_wait_ms=wait,
        compute_ms=compute,
        steps=10,
        peak_rss_mib=100.0,
        peak_device_mib=None,
        compute_ms_range=span(compute),
        data_wait_ms_range=span(wait),
        fed_samples_per_s_range=span(rate),
        load=load,
    )


def test_gan_verdict_reports_the_measured_direction_with_ranges():
    # the contradiction a reader found: prose said the GAN step costs more compute; the run measured less
    g, shared, second = _result(1511.0, 1.0, 10.0), _result(481.0, 1.0, 30.0), _result(500.0, 1.2, 28.0, spread=0.1)
    text = gan_verdict({"G": g, "GAN shared": shared, "GAN second": second}, batch=16)
    assert "the shared-loader GAN against G alone: 0.32x (less) (range 0.31–0.33x)" in text  # the table has the ms
    assert len(text.split()) <= 80
    assert "within the noise of this machine" in text  # 30 against 28 (25.2–30.8) iterations overlap
    assert "busy" not in text
    busy = gan_verdict({"G": g, "GAN shared": _result(481.0, 1.0, 30.0, busy=True), "GAN second": second}, batch=16)
    assert "Busy machine: other processes used 0.8 of 2 cores." in busy


def test_pipelines_claim_verdict_gives_each_side_its_range():
    before, after = _result(10.0, 40.0, 20.0), _result(10.0, 1.0, 60.0)
    text = pipelines_claim_verdict({"before": before, "after": after}, claimed_before=18, claimed_after=25)
    assert "'after' 60.0 (58.8–61.2) images/s against 'before' 20.0 (19.6–20.4), 3.0x (range 2.88–3.12x)" in text


def test_the_table_notes_name_differing_pre_mades_and_columns_off_the_efficiency():
    import dataclasses

    before, after = _result(10.0, 40.0, 20.0), _result(10.0, 1.0, 60.0)
    apart = {  # columns agree with each efficiency; the two pre-made steps are 23% apart
        "a": dataclasses.replace(
            before, premade_step_ms=121.6, data_wait_ms=1.0, compute_ms=159.0, pipeline_efficiency=0.76
        ),
        "b": dataclasses.replace(
            after, premade_step_ms=98.9, data_wait_ms=1.0, compute_ms=98.0, pipeline_efficiency=1.0
        ),
    }
    notes = pipelines_table_notes(apart)
    assert len(notes) == 1 and notes[0].startswith("The same step on pre-made batches took 121.6 and 98.9 ms")
    assert "23% apart: the same batches' layout, so the spread between blocks" in notes[0]
    # reader 4, 05: 134.8 against 91.4 ms was the two loaders' batch layouts, not noise
    laid = pipelines_table_notes(apart, layouts={"a": "NCHW", "b": "channels_last"})
    assert "they arrive as NCHW and channels_last: the layout is part of what each pipeline costs" in laid[0]
    assert batch_layout(torch.zeros(2, 3, 4, 4)) == "NCHW"
    assert batch_layout(torch.zeros(2, 3, 4, 4).to(memory_format=torch.channels_last)) == "channels_last"
    assert batch_layout(torch.zeros(2, 3, 4, 8)[..., ::2]) == "strided"
    off = {
        "a": dataclasses.replace(
            before, premade_step_ms=118.1, data_wait_ms=7.0, compute_ms=151.9, pipeline_efficiency=0.78
        )
    }
    assert pipelines_table_notes(off) == [
        "'a': pre-made / (wait + compute) is 0.74 against its efficiency 0.78, the median of its block pairs' "
        "ratios: the ms are means over every step, where a slow block weighs in."
    ]
    close = {
        "a": dataclasses.replace(before, premade_step_ms=100.0, data_wait_ms=1.0, compute_ms=99.0),
        "b": dataclasses.replace(after, premade_step_ms=109.0, data_wait_ms=1.0, compute_ms=108.0),
    }
    assert pipelines_table_notes(close) == []


def test_sr_verdict_states_the_spread_over_images():
    text = sr_verdict([0.54, 1.07, 0.19], data="BSDS300 stand-in, not BSD100")
    assert "mean +0.60 dB" in text and "from +0.19 to +1.07" in text and "above bicubic on 3 of 3" in text
    assert "not BSD100" in text


def test_sr_verdict_leads_with_the_photographs_held_out_whole():
    text = sr_verdict([3.0, 0.4, 5.0, 0.2], data="stand-in", held_out=[1, 3])
    unseen, seen = text.index("On the 2 photographs held out whole: mean +0.30 dB"), text.index("On the 2 tiles")
    assert unseen < seen and "mean +4.00 dB (from +3.00 to +5.00)" in text
    assert "held out" not in sr_verdict([1.0, 2.0], data="BSD100", held_out=[0, 1])  # all unseen: one number


def test_accuracy_verdict_with_one_evaluation_says_so():
    one = [{"top1": 0.208, "trained_seconds": 107.0, "optimizer_steps": 28}]
    text = accuracy_verdict(one, classes=10, data="stand-in")
    assert "20.8%" in text and "single point" in text and "half of that" not in text
    two = [{"top1": 0.3, "trained_seconds": 50.0, "optimizer_steps": 10}, *[dict(one[0], top1=0.5)]]
    assert "half of that top-1 (25.0%) was reached by 50 s, the first of the 2 evaluations" in accuracy_verdict(
        two, classes=10, data="stand-in"
    )


def test_rank_reads_verdict_sets_bytes_read_against_bytes_read_and_names_decoding_apart():
    reads = [
        {"ranks": 1, "jpeg_mib": 80.0, "cache_mib": 100.0, "lazy_mib": 700.0},
        {"ranks": 8, "jpeg_mib": 10.0, "cache_mib": 12.5, "lazy_mib": 87.5},
    ]
    text = rank_reads_verdict(reads)
    assert "12.5 MiB of crops per epoch from the uint8 cache against 10.0 MiB of JPEG files" in text
    assert "1.25x: more bytes" in text and "larger gain" not in text
    assert "lazy crops decode 88 MiB of pixels per rank per epoch, the cache none" in text


def test_census_verdict_on_a_stand_in_says_it_cannot_test_the_claim():
    from collections import Counter

    census = Counter({(481, 321, "RGB", "JPEG"): 25, (451, 300, "RGB", "JPEG"): 1})
    real = census_verdict(census, claimed=(288, 288), standard={(481, 321), (321, 481)})
    assert real.startswith("0 of 26 images are 288x288; 25 have") and "cannot test" not in real
    standin = census_verdict(census, claimed=(288, 288), standard={(481, 321), (321, 481)}, standin=True)
    assert "cannot test the claim" in standin


def test_decode_and_layout_verdicts_give_repeated_timings_their_ranges():
    text = decode_verdict([1.0, 1.1, 0.9], [4.0, 4.2, 3.8], (481, 321), (481, 321))
    assert text.startswith("A 32-px crop against a full decode: 0.25x (less) (range 0.24–0.26x over 3 paired rounds)")
    close = decode_verdict([3.9, 4.1, 4.3], [4.0, 4.2, 3.8], (481, 321), (481, 321))
    assert "within the noise of this machine" in close and "cropping saved no decoding time" in close
    layout = layout_verdict(rgb_ms=[2.0, 2.2, 1.8], word_ms=[1.0, 1.0, 1.0])
    assert (
        "2.000 (1.800–2.200) ms as 3-byte pixels" in layout and "2.0x (range 1.80–2.20x over 3 paired rounds)" in layout
    )
    assert "crop took 25% of a full decode" in decode_verdict(1.0, 4.0, (1, 1), (2, 2))


def test_a_single_measurement_on_each_side_says_it_has_no_range():
    text = compare(Spread.single(4.15), Spread.single(1.0), pick=("a", "b"))
    assert text == "4.2x (one measurement each: no range)"  # and no tie named: there is no range to overlap


def test_doctor_change_verdict_reads_fed_rates_with_their_ranges():
    before = SimpleNamespace(fed_samples_per_s=Spread(10.0, 9.0, 11.0, 3), verdict="INPUT-BOUND")
    after = SimpleNamespace(fed_samples_per_s=Spread(20.0, 18.0, 22.0, 3), verdict="INCONCLUSIVE")
    text = doctor_change_verdict(before, after, change="2 persistent workers")
    assert "fed 20.0 samples/s (18.0–22.0) against 10.0 (9.0–11.0) before" in text
    assert "2.0x (range 1.64–2.44x)." in text  # the ratio with its range, not alone
    assert "input-bound before and inconclusive after" in text
    close = SimpleNamespace(fed_samples_per_s=Spread(10.5, 9.5, 12.0, 3), verdict="INPUT-BOUND")
    tied = doctor_change_verdict(before, close, change="x")
    assert "within the noise of this machine: measured 1.1x (range 0.86–1.33x)" in tied
    assert "cannot tell 'with x' and 'before' apart" in tied
    # reader 3, 01: compute-bound before and input-bound after, a tie between them: the numbers either side of the line
    from helpers.bottleneck import Shares

    quiet = SimpleNamespace(fed_samples_per_s=Spread(10.0, 9.0, 11.0, 3), verdict="COMPUTE-BOUND")
    quiet.shares = Shares.of(9.3, 90.7, 92.0)
    waits = SimpleNamespace(fed_samples_per_s=Spread(10.5, 9.5, 12.0, 3), verdict="INPUT-BOUND")
    waits.shares = Shares.of(10.1, 89.9, 88.0)
    flipped = doctor_change_verdict(quiet, waits, change="x")
    assert "compute-bound before (no cost of the loader reaches 10% of a step" in flipped
    assert "input-bound after (10% of each fed step waits for data): either side of a line" in flipped
    assert "(" not in doctor_change_verdict(before, after, change="y").split("The doctor read")[1]


def test_a_tie_says_which_candidate_the_course_keeps_and_why_when_given():
    text = compare(Spread(1.0, 0.9, 1.1), Spread(1.05, 0.95, 1.15), pick=("a", "b"), keep=("b", "the default"))
    assert text.endswith("cannot tell 'a' and 'b' apart on this machine: the course keeps 'b', the default")
    assert "would pick" not in text


def test_03_and_06_verdicts_carry_the_load_meters_line_when_the_machine_was_busy():
    # 03's precision and channels_last verdicts and 06's same-steps verdict were printed without saying how busy the
    # machine was while their timings ran
    from helpers.loadmeter import LoadReading

    busy, quiet = LoadReading(0.8, 2, 10.0, None), LoadReading(0.0, 2, 10.0, None)
    line = " Busy machine: other processes used 0.8 of 2 cores."
    precision = [
        {"precision": "fp32", "native": True, "step_ms": 10.0, "losses": [0.5]},
        {"precision": "bf16", "native": True, "step_ms": 20.0, "losses": [0.5]},
    ]
    layouts = {("NCHW", "fp32"): [20.0, 21.0], ("channels_last", "fp32"): [9.0, 10.0]}
    steps = dict(
        post_rates=[10.0, 11.0],
        course_rates=[100.0, 110.0],
        post_px=224,
        course_px=32,
        post_batch=8,
        course_batch=64,
        same_network=True,
    )
    for verdict in (
        lambda load: precision_verdict(precision, device="cpu", load=load),
        lambda load: channels_last_verdict(layouts, load=load),
        lambda load: same_steps_verdict(**steps, load=load),
    ):
        assert verdict(busy).endswith(line)
        assert "busy" not in verdict(quiet) and "busy" not in verdict(None)


def test_02s_cache_reopen_reads_interleaved_repeats_with_ranges_and_the_load():
    from helpers.loadmeter import LoadReading

    text = reopen_verdict([2.0, 2.2, 1.9], [0.01, 0.012, 0.011], images=200, mib=300.0)
    assert "took 2.00 (1.90–2.20) s and reopening it 0.011 (0.010–0.012) s over 3 interleaved repeats" in text
    assert "building against reopening: 181.8x (range 172.73–200.00x over 3 paired rounds)" in text
    assert "busy" not in text.lower()
    close = reopen_verdict([1.0, 1.2], [1.1, 1.0], images=2, mib=1.0, load=LoadReading(1.0, 2, 3.0))
    assert "within the noise of this machine" in close and "cannot tell 'building' and 'reopening' apart" in close
    assert close.endswith("Busy machine: other processes used 1.0 of 2 cores.")
    busy = LoadReading(1.0, 2, 3.0)
    assert layout_verdict(rgb_ms=[1.0, 1.1], word_ms=[0.5, 0.6], load=busy).endswith("of 2 cores.")
    assert decode_verdict([1.0, 1.1], [2.0, 2.1], (4, 4), (4, 4), load=busy).endswith("of 2 cores.")


def _format_rows(jpeg_rate, png_rate, spread=0.02):
    return [
        _ladder_row("lazy crop, 2 workers", jpeg_rate, 90, 100, 0.9, role="lazy crop, workers", spread=spread),
        _ladder_row(
            "lazy crop on PNG copies of the same images, 2 workers",
            png_rate,
            50,
            100,
            0.5,
            role="lazy crop on PNG",
            spread=spread,
        ),
        _ladder_row("decoded uint8 cache", 2000, 95, 100, 0.95, role="decoded cache", spread=spread),
    ]


def test_file_format_verdict_names_the_decoders_share_when_the_ranges_are_apart():
    text = file_format_verdict(_format_rows(500, 200))
    assert "against PNG copies of the same images: 2.5x (range" in text and "the decoder's" in text
    assert "no measurable difference" not in text
    # the decoded cache against each lazy rung, by its short name and with its range: 2000/500 and 2000/200
    assert (
        "against 'lazy crop, workers' 4.0x (range 3.84–4.16x)" in text
        and "against 'lazy crop on PNG' 10.0x (range 9.61–10.41x)" in text
    )


def test_file_format_verdict_says_when_the_format_makes_no_difference():
    text = file_format_verdict(_format_rows(500, 495, spread=0.05))
    assert "within the noise of this machine" in text and "no measurable difference" in text
    assert "the decoder's" not in text


def test_file_format_verdict_says_when_its_loaders_were_measured_on_a_busy_machine():
    quiet = _format_rows(500, 200)
    assert "busy machine" not in file_format_verdict(quiet)
    rows = _format_rows(500, 200)
    rows[1].load_note = "other processes used 0.9 of 2 cores during this measurement"
    rows[1].load = {"other_cores": 0.9, "cores": 2, "busy": True}
    text = file_format_verdict(rows)
    assert text.endswith(" Busy machine: other processes used 0.9 of 2 cores.")


def test_the_reduction_text_says_when_no_box_decodes_at_reduced_size():
    some = reduction_text(0.62, 0.25, 224)
    assert some == (
        "62% of 224-px RandomResizedCrop boxes decode at reduced size; the median box decodes 25% of the pixels a "
        "full decode does."
    )
    none = reduction_text(0.0, 1.0, 224)
    assert none.startswith("0% of 224-px") and "decodes every file whole" in none and "jitter moved" in none


def test_the_wait_verdict_says_when_the_machine_was_busy():
    from helpers.loadmeter import LoadReading

    lazy = {"wait_fraction": 0.36, "median_wait_s": 0.01, "max_wait_s": 0.05, "median_compute_s": 0.02, "steps": 16}
    summaries = {"lazy": lazy}
    quiet = wait_verdict(summaries, claimed_fraction=0.75)
    assert "'lazy' waited 36% of the time" in quiet and "less than the 75%" in quiet and "busy" not in quiet
    busy = wait_verdict(summaries, claimed_fraction=0.75, load=LoadReading(1.1, 2, 3.0))
    assert busy.endswith("Busy machine: other processes used 1.1 of 2 cores.")


def test_cores_used_never_prints_a_range_whose_ends_read_alike():
    assert cores_used([0.98, 1.04]) == "1.0" and cores_used([1.1, 1.7]) == "1.1–1.7"


def test_the_min_model_names_the_rungs_it_predicts_and_the_furthest_below():
    from helpers.course.verdicts.ladder import min_model_verdict

    rows = [_ladder_row("lazy", 600, 151, 300, 0.5), _ladder_row("cache", 30000, 241, 250, 0.96)]
    text = min_model_verdict(rows)
    assert "within 20% for 1 of 2 rungs" in text and "'lazy' fed 0.50x its prediction" in text
    assert min_model_verdict(rows[1:]).endswith("for 1 of 1 rungs.")  # none below it: nothing more to say
