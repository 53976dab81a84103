"""Verdicts say what the numbers say, including when the numbers contradict what a lesson might have expected."""

from __future__ import annotations

from types import SimpleNamespace

from helpers.course import verdicts


def _sweep_row(workers, rate, runs=None, prefetch=2, threads=None, compute=None):
    row = {"num_workers": workers, "prefetch_factor": prefetch if workers else None, "pin_memory": False,
           "samples_per_s": rate, "runs": runs or [rate], "intra_op_threads": threads}  # fmt: skip
    if compute is not None:
        row.update(mode="end to end", compute_ms=compute, compute_runs=[compute], data_wait_ms=1.0)
    return row


def test_sweep_verdict_reports_a_peak_past_the_core_count():
    # the contradiction a reader found: the best setting had 4 workers on 2 cores, and prose said "flattens at cores"
    rows = [_sweep_row(0, 12), _sweep_row(1, 30), _sweep_row(2, 55), _sweep_row(4, 61)]
    text = verdicts.sweep_verdict(rows, cores=2)
    assert "4 workers" in text and "more workers than cores" in text and "flatten" not in text


def test_sweep_verdict_names_settings_within_the_noise():
    rows = [_sweep_row(0, 12, [11, 13]), _sweep_row(2, 55, [50, 60]), _sweep_row(4, 58, [52, 63])]
    text = verdicts.sweep_verdict(rows, cores=2)
    assert "within this machine's noise" in text and "fewest workers among them 2" in text


def test_sweep_verdict_shows_oversubscription_at_the_same_thread_count():
    rows = [_sweep_row(0, 40, [38, 42], threads=2, compute=20.0), _sweep_row(2, 35, [33, 36], threads=2, compute=41.0),
            _sweep_row(0, 25, [24, 26], threads=1, compute=35.0), _sweep_row(1, 50, [48, 52], threads=1, compute=36.0),
            _sweep_row(2, 45, [44, 47], threads=1, compute=52.0)]  # fmt: skip
    text = verdicts.sweep_verdict(rows, cores=2)
    assert text.startswith("End to end") and "1 worker, 1 intra-op thread, prefetch 2: 50 samples/s" in text
    assert "with 1 thread, 35.5 ms per step within the cores (35.0–36.0) against 52.0 (52.0–52.0) past them: slower" in text
    assert "with 2 threads, 20.0 ms per step within the cores (20.0–20.0) against 41.0 (41.0–41.0) past them: slower" in text


def test_sweep_verdict_tests_two_to_four_times_the_cores():
    fewer = [_sweep_row(0, 10, [9, 11]), _sweep_row(2, 50, [48, 52])]
    assert "is not supported here: 2 workers" in verdicts.sweep_verdict(fewer + [_sweep_row(4, 30, [29, 31])], cores=2)
    assert "is supported here: 8 workers" in verdicts.sweep_verdict(fewer + [_sweep_row(8, 70, [66, 72])], cores=2)
    assert "is within the noise here" in verdicts.sweep_verdict(fewer + [_sweep_row(4, 51, [49, 53])], cores=2)
    assert "is untested here: no setting had 4–8 workers" in verdicts.sweep_verdict(fewer, cores=2)


def test_sweep_and_ladder_agree_or_say_what_differs():
    sweep = [_sweep_row(0, 100, [95, 105], threads=2), _sweep_row(2, 60, [58, 62], prefetch=4, threads=1)]
    ladder = [{"name": "plain", "fed_samples_per_s": 101, "rounds": 5, "steps_per_turn": 7},
              {"name": "tuned", "fed_samples_per_s": 90, "rounds": 5, "steps_per_turn": 7}]  # fmt: skip
    pairs = [("plain", {"num_workers": 0}), ("tuned", {"num_workers": 2, "prefetch_factor": 4})]
    text = verdicts.sweep_ladder_verdict(sweep, ladder, pairs=pairs, ladder_threads=2)
    assert "'plain' 101 samples/s in the ladder against 100 samples/s (95–105)" in text and "agree within the noise" in text
    assert "'tuned' 90 samples/s in the ladder against 60 samples/s (58–62) in the sweep" in text
    assert "What differs" in text and "ran with 1 intra-op thread(s) against the ladder's 2" in text
    assert "What differs" not in verdicts.sweep_ladder_verdict(sweep, ladder, pairs=pairs[:1], ladder_threads=2)


def _ladder_row(name, alone, fed, ideal, efficiency, note=""):
    return {"name": name, "samples_per_s": alone, "fed_samples_per_s": fed, "ideal_samples_per_s": ideal,
            "pipeline_efficiency": efficiency, "model_note": note}  # fmt: skip


def test_ladder_verdict_compares_end_to_end_only_among_rungs_with_the_same_model():
    rows = [
        _ladder_row("traditional", 100, 12, 14, 0.89, note="HR-size inputs"),
        _ladder_row("lazy", 600, 151, 300, 0.50),
        _ladder_row("cache", 30000, 241, 250, 0.96),
    ]
    text = verdicts.ladder_verdict(rows)
    # the efficient-looking traditional rung is not in it; the fastest is set against the next, not the slowest
    assert "'lazy' 151, 'cache' 241 samples/s; the fastest, 'cache', 1.6x the next, 'lazy'" in text
    assert "'traditional' 12" not in text
    assert "'traditional' feeds another model: HR-size inputs" in text and "'cache' 300.0x" in text


def test_seed_claim_verdict_compares_end_to_end_with_end_to_end():
    before = _ladder_row("traditional", 100, 12, 14, 0.89, note="HR-size inputs")
    after = _ladder_row("lazy", 600, 151, 300, 0.50)
    text = verdicts.seed_claim_verdict(before=before, after=after, claimed_before=18, claimed_after=25)
    assert "12.6x" in text and "1.4x" in text and "these two mix loader and model" in text
    # like for like first: the loaders alone (600/100); then efficiency and end to end, which mix loader and model
    # (the efficiency is not inside the like-for-like sentence); then the post's claim on its own
    like_for_like = text[: text.index(". ")]
    assert "6.0x" in like_for_like and "efficiency" not in like_for_like
    assert text.index("6.0x") < text.index("Pipeline efficiency") < text.index("end to end") < text.index("12.6x")
    assert text.index("12.6x") < text.index("The post reported")


def test_ladder_verdict_names_overlapping_ranges_and_efficiency_above_one_as_noise():
    rows = [
        {**_ladder_row("plain", 1000, 200, 210, 0.95), "samples_per_s_range": (900, 1100), "efficiency_range": (0.9, 0.99)},
        {**_ladder_row("tuned", 1050, 205, 200, 1.02), "samples_per_s_range": (950, 1150), "efficiency_range": (0.97, 1.06)},
    ]
    text = verdicts.ladder_verdict(rows)
    assert "'tuned' 1.1x (ranges overlap: within the noise)" in text
    assert "'tuned' 1.02 (0.97–1.06), as fast as pre-made batches within the noise" in text and "best" not in text


def test_one_lucky_block_does_not_make_a_rung_as_fast_as_pre_made_batches():
    # the contradiction a reader found: a rung waiting 14% of each step (median 0.85) reached 1.08 in one block
    text = verdicts.efficiency_text({"pipeline_efficiency": 0.85, "efficiency_range": (0.84, 1.08)})
    assert text == "0.85 (0.84–1.08)"


def test_augmentation_claim_verdict_compares_like_for_like_first_and_says_no_gpu_was_measured():
    post = {**_ladder_row("post", 700, 28, 31, 0.9), "samples_per_s_range": (650, 750)}
    native = {**_ladder_row("pil32", 1800, 600, 1700, 0.37), "samples_per_s_range": (1700, 1900)}
    kornia = {**_ladder_row("kornia", 20000, 2100, 2100, 1.0), "samples_per_s_range": (19000, 21000)}
    text = verdicts.augmentation_claim_verdict(post=post, native=native, device_rung=kornia, claimed_ratio=32,
                                               device="cpu")  # fmt: skip
    assert "measured no GPU" in text and "decode + augment" in text
    assert text.index("11.1x") < text.index("28.6x")  # same 32 px (20000/1800) before the post's 224-px pipeline
    on_gpu = verdicts.augmentation_claim_verdict(post=post, native=native, device_rung=kornia, claimed_ratio=32,
                                                 device="cuda:0")  # fmt: skip
    assert "measured no GPU" not in on_gpu and "on cuda:0" in on_gpu


def test_same_steps_verdict_names_everything_the_two_set_ups_differ_in():
    text = verdicts.same_steps_verdict(post_rates=[2.0, 2.2, 1.9], course_rates=[30.0, 28.0, 31.0], post_px=224,
                                       course_px=32, post_batch=8, course_batch=32, same_network=False)  # fmt: skip
    assert "15.0x" in text and "ImageNet-stem" in text and "batch (8 against 32)" in text and "49x the pixels" in text
    assert "not the loader's alone" in text and "3.1x the positions" in text  # (224/4)^2 against 32^2


def test_memory_verdict_says_more_than_the_claim_when_it_is():
    rows = [{"scale": 4, "traditional_mib": 700, "cache_mib": 125, "total_ratio": 5.6, "input_ratio": 64}]
    text = verdicts.memory_verdict(rows, claimed_input_ratio=16)
    assert "700 MiB against 125 MiB" in text and "64x" in text and "more than the 16x claimed" in text


def test_precision_verdict_marks_emulated_precisions_and_compares_losses_at_a_common_step():
    results = [
        {"precision": "fp32", "native": True, "step_ms": 66.0, "losses": [0.5, 0.4, 0.3, 0.2]},
        {"precision": "bf16", "native": False, "step_ms": 564.0, "losses": [0.5, 0.41, 0.31]},
    ]
    text = verdicts.precision_verdict(results, device="cpu")
    assert "bf16 8.5x the fp32 step time, not native here" in text and "fastest step was fp32" in text
    assert "After 3 steps" in text and "fp32 0.3000" in text


def test_gan_verdict_reports_the_measured_direction():
    # the contradiction a reader found: prose said the GAN step costs more compute; the run measured less
    g = SimpleNamespace(compute_ms=1511.0, data_wait_ms=1.0, samples_per_s=10.0)
    shared = SimpleNamespace(compute_ms=481.0, data_wait_ms=1.0, samples_per_s=30.0)
    second = SimpleNamespace(compute_ms=500.0, data_wait_ms=1.2, samples_per_s=28.0)
    text = verdicts.gan_verdict({"G": g, "GAN shared": shared, "GAN second": second}, batch=16)
    assert "481.0 ms against 1511.0 ms" in text and "0.32x (less)" in text


def test_sr_verdict_states_the_spread_over_images():
    text = verdicts.sr_verdict([0.54, 1.07, 0.19], data="BSDS300 stand-in, not BSD100")
    assert "mean +0.60 dB" in text and "from +0.19 to +1.07" in text and "3 of 3 images" in text
    assert "not BSD100" in text


def test_accuracy_verdict_with_one_evaluation_says_so():
    one = [{"top1": 0.208, "trained_seconds": 107.0, "optimizer_steps": 28}]
    text = verdicts.accuracy_verdict(one, classes=10, data="stand-in")
    assert "20.8%" in text and "single point" in text and "half of that" not in text
    two = [{"top1": 0.3, "trained_seconds": 50.0, "optimizer_steps": 10}, *[dict(one[0], top1=0.5)]]
    assert "half of that was reached after 50 s" in verdicts.accuracy_verdict(two, classes=10, data="stand-in")


def test_rank_reads_verdict_sets_bytes_read_against_bytes_read_and_names_decoding_apart():
    reads = [{"ranks": 1, "jpeg_mib": 80.0, "cache_mib": 100.0, "lazy_mib": 700.0},
             {"ranks": 8, "jpeg_mib": 10.0, "cache_mib": 12.5, "lazy_mib": 87.5}]  # fmt: skip
    text = verdicts.rank_reads_verdict(reads)
    assert "12.5 MiB of crops from the uint8 cache against 10.0 MiB of JPEG files" in text
    assert "1.25x: the cache reads more bytes" in text and "larger gain" not in text
    assert "decodes none" in text and "700 MiB at 1 rank" in text and "700 MiB for the node" in text


def test_census_verdict_on_a_stand_in_says_it_cannot_test_the_claim():
    from collections import Counter

    census = Counter({(481, 321, "RGB", "JPEG"): 25, (451, 300, "RGB", "JPEG"): 1})
    real = verdicts.census_verdict(census, claimed=(288, 288), standard={(481, 321), (321, 481)})
    assert real.startswith("0 of 26 images are 288x288; 25 have") and "cannot test" not in real
    standin = verdicts.census_verdict(census, claimed=(288, 288), standard={(481, 321), (321, 481)}, standin=True)
    assert "cannot test the claim" in standin


def test_doctor_change_verdict_reads_fed_rates_with_their_ranges():
    before = SimpleNamespace(fed_samples_per_s=(10.0, 9.0, 11.0), verdict="INPUT-BOUND")
    after = SimpleNamespace(fed_samples_per_s=(20.0, 18.0, 22.0), verdict="INCONCLUSIVE")
    text = verdicts.doctor_change_verdict(before, after, change="2 persistent workers")
    assert "fed 20.0 samples/s (18.0–22.0) against 10.0 (9.0–11.0) before" in text and "2.0x." in text
    assert "input-bound before and inconclusive after" in text
    close = SimpleNamespace(fed_samples_per_s=(10.5, 9.5, 12.0), verdict="INPUT-BOUND")
    assert "within the noise" in verdicts.doctor_change_verdict(before, close, change="x")
