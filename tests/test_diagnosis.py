"""The doctor's report (diagnosis.py): a budget buys steps per block above a minimum and says when even the minimum is
over it; per-block-pair numbers become a verdict read pair by pair, medians with their ranges, and a report that
names what measured it, the pipeline, the machine, what the run did to the model and what to try."""

from __future__ import annotations

import pytest
import torch

from helpers.bottleneck import COMPUTE_BOUND, INPUT_BOUND
from helpers.diagnosis import build_diagnosis, copy_ms, notify_stderr, plan_blocks
from helpers.loadmeter import LoadReading
from helpers.pipeline_facts import PipelineFacts
from helpers.pipeline_result import PipelineResult
from helpers.spread import Spread

FACTS = PipelineFacts(loader="DataLoader", dataset="FakeData", num_workers=0, task="classification", cpu_cores=2)
WAITING = {  # every pair waits most of its step for data
    "wait": [20.0, 18.0, 25.0],
    "compute": [15.0, 15.0, 16.0],
    "premade": [14.0, 14.0, 14.5],
    "efficiency": [0.40, 0.45, 0.38],
    "fed": [30.0, 32.0, 28.0],
}
REPORT = {"trained_steps": 12, "seconds": 3.0, "budget_s": 5.0, "method": "the method", "measured": "what it timed"}


def test_a_budget_buys_steps_split_over_the_blocks_above_a_minimum():
    assert plan_blocks(10.0, 0.1).steps == 33 and plan_blocks(20.0, 0.1).steps == 66
    assert plan_blocks(10.0, 0.1, blocks=5).steps == 20
    settled = plan_blocks(10.0, 0.1, settle=2)  # the untimed steps opening each block come out of the budget
    assert settled.steps == 31 and settled.seconds == pytest.approx(3 * 33 * 0.1)
    assert plan_blocks(0.5, 0.1).steps == 3 and plan_blocks(0.5, 0.1, minimum=5).steps == 5
    assert plan_blocks(10.0, 0.1, steps=7).steps == 7  # fixed steps, whatever the budget


def test_a_plan_says_before_it_starts_whether_it_fits_its_budget():
    fits = plan_blocks(10.0, 0.1)
    assert not fits.over_budget and fits.note().endswith("about 10 s of timed blocks, within budget_s=10")
    over = plan_blocks(0.5, 0.1)
    assert over.over_budget and over.seconds == pytest.approx(0.9)
    assert "over budget_s=0.5: 3 steps per block is the least that gives a median" in over.note()
    assert not plan_blocks(0.5, 0.1, steps=4).over_budget  # more than the minimum was asked for: not the budget's fault
    assert "3 block pairs of 31 (+ 2 untimed) steps each" in plan_blocks(10.0, 0.1, settle=2).note()


def test_each_pair_is_read_on_its_own_and_the_medians_decide():
    mixed = {**WAITING, "wait": [20.0, 0.5, 18.0], "efficiency": [0.40, 0.95, 0.50]}
    diagnosis = build_diagnosis(mixed, FACTS, None, **REPORT)
    assert diagnosis.readings == [INPUT_BOUND, COMPUTE_BOUND, INPUT_BOUND] and diagnosis.verdict == INPUT_BOUND
    assert diagnosis.confidence != "sure"  # one pair of three disagrees
    assert diagnosis.data_wait_ms == Spread(18.0, 0.5, 20.0, 3) and diagnosis.efficiency == Spread(0.50, 0.40, 0.95, 3)
    assert diagnosis.fed_samples_per_s == Spread(30.0, 28.0, 32.0, 3)
    assert diagnosis.premade_step_ms == Spread(14.0, 14.0, 14.5, 3)
    assert "data-wait 18.0 (0.5–20.0) ms, compute 15.0 (15.0–16.0) ms" in diagnosis.headline  # as Spread.text words it
    agreed = build_diagnosis(WAITING, FACTS, None, **REPORT)
    assert agreed.readings == [INPUT_BOUND] * 3 and agreed.confidence == "sure"


def test_the_report_names_its_measurement_pipeline_machine_and_what_to_try():
    text = str(build_diagnosis(WAITING, FACTS, None, plan="the plan", **REPORT))
    lines = text.splitlines()
    assert lines[0].startswith(f"{INPUT_BOUND} (sure): efficiency 0.40 (0.38–0.45) over 3 block pairs;")
    assert "data-wait 20.0 (18.0–25.0) ms, compute 15.0 (15.0–16.0) ms, against 14.0 (14.0–14.5) ms" in lines[0]
    assert "Measured: the method: what it timed" in lines and f"Pipeline: {FACTS.summary()}." in lines
    assert "Machine: other processes' CPU use was not measured." in lines
    assert "Try, in order:" in lines and any("more DataLoader workers (0 now, 2 cores)" in line for line in lines)
    assert lines[-1] == "Budget: the plan; measured in 3.0 s with the warm-up."


def test_the_report_says_what_the_run_did_to_the_model():
    watched = str(build_diagnosis(WAITING, FACTS, None, replayed_steps=4, **REPORT))
    assert "It trained your model: 12 optimizer steps ran, 4 of them on replayed batches" in watched
    result = PipelineResult(30.0, 75.0, 0.4, 20.0, 15.0, 12, 100.0, None)
    controlled = str(build_diagnosis(WAITING, FACTS, None, result=result, **REPORT))
    assert "It trained the model it measured: 12 steps ran" in controlled and "copy.deepcopy" in controlled


def test_no_copy_is_timed_off_cuda_and_the_up_front_line_goes_to_stderr(capsys):
    batch = (torch.zeros(2, 3), torch.zeros(2))
    assert copy_ms(batch, torch.device("cpu")) is None  # no host-to-device copy to time
    notify_stderr("3 block pairs")
    assert capsys.readouterr().err == "doctor: 3 block pairs\n"


def test_a_busy_machine_is_measured_on_one_line_and_named_in_how_sure_and_the_advice():
    busy = LoadReading(other_cores=1.1, cores=2, seconds=3.0, load_average=2.1)
    text = str(build_diagnosis(WAITING, FACTS, busy, **REPORT))
    lines = text.splitlines()
    assert text.count("other processes used 1.1 of 2 cores") == 1, text
    assert "Machine: other processes used 1.1 of 2 cores during this measurement; load average 2.1." in lines
    assert lines[1] == "How sure: fairly sure: the machine was busy (its line below says how busy)."
    assert "- rerun with the other processes stopped to confirm (the machine was busy)." in lines
    quiet = str(build_diagnosis(WAITING, FACTS, LoadReading(0.1, 2, 3.0), **REPORT))
    assert "busy" not in quiet and "rerun" not in quiet


def test_the_label_reads_the_medians_it_prints_and_says_when_the_pairs_median_differs():
    # reader 4, 01 c22: efficiency 0.92 printed beside medians that give 806.2 / 901.0 = 0.895
    blocks = {**WAITING, "wait": [90.0, 94.8, 92.0], "compute": [806.0, 808.8, 810.0], "premade": [806.2] * 3}
    blocks["efficiency"] = [0.91, 0.92, 0.93]
    diagnosis = build_diagnosis(blocks, FACTS, None, **REPORT)
    assert diagnosis.shares.efficiency == 0.89 and diagnosis.verdict == INPUT_BOUND  # 10% wait, efficiency below 0.90
    assert "(the block pairs' median; the ms below give 0.89, which the label reads)" in diagnosis.headline
    assert "kept pace" not in str(diagnosis)
