"""The pipeline doctor's report, whichever way it measured (the controlled comparison of `doctor.diagnose`, or your own
loop watched by `doctor_watch.watch`): the most likely bottleneck with how sure it is, the numbers it rests on with
their ranges over blocks, what measured them, the machine's load, what to try and which lesson teaches it; and the
plan that turns a time budget into steps (saying before it starts when the smallest plan exceeds the budget).

    >>> plan = plan_blocks(10.0, seconds_per_pair=8.0, blocks=3)
    >>> plan.steps, plan.over_budget
    (3, True)

Copy with: bottleneck.py (the labels), spread.py (numbers with their ranges), doctor_advice.py (what to try) with
pipeline_facts.py, env.py and loadmeter.py, measure.py (timing one copy to the device) with memory.py and
pipeline_result.py.
Needs: psutil, torch.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .bottleneck import Finding, Shares, classify, most_likely, ms_efficiency_note, shares_text
from .doctor_advice import advice_for, notes_for
from .loadmeter import LoadReading
from .measure import clock, device_of, synchronize, to_device
from .pipeline_facts import PipelineFacts
from .pipeline_result import PipelineResult
from .spread import Spread, efficiency_text

MINIMUM_STEPS = 3  # steps per block at the least, whatever the budget: a median of fewer says little
COPY_HOWTO = (
    "To leave yours as it was, measure a copy: `model2, optimizer2 = copy.deepcopy((model, optimizer))` (one "
    "call, so the copied optimizer steps the copied model) and build the step on them, or pass "
    "`copy.deepcopy(train_step)` for a TrainStep."
)


def notify_stderr(line: str) -> None:
    """Say one line now, before the measurement goes on (the doctor's default for what must be said up front)."""
    print(f"doctor: {line}", file=sys.stderr, flush=True)


@dataclass
class Plan:
    """How a budget was spent: `blocks` block pairs of `steps` steps each, from the time one pair was measured to take."""

    budget_s: float
    blocks: int
    steps: int
    seconds_per_pair: float
    minimum: int = MINIMUM_STEPS
    settle: int = 0  # untimed steps that open each block, on top of `steps`

    @property
    def seconds(self) -> float:
        """The blocks' expected seconds, their settling steps included."""
        return self.blocks * (self.steps + self.settle) * self.seconds_per_pair

    @property
    def over_budget(self) -> bool:
        """True when even the smallest plan (the minimum steps per block) takes longer than the budget."""
        return self.steps <= self.minimum and self.seconds > self.budget_s

    def note(self) -> str:
        """The plan in words, and whether it exceeds the budget (said before it starts)."""
        settle = f" (+ {self.settle} untimed)" if self.settle else ""
        plan = (
            f"{self.blocks} block pairs of {self.steps}{settle} steps each, at {self.seconds_per_pair:.2f} s a fed + pre-made "
            f"step pair as measured: about {self.seconds:.0f} s of timed blocks"
        )
        if self.over_budget:
            return (
                f"{plan}, over budget_s={self.budget_s:g}: {self.minimum} steps per block is the least that gives a "
                f"median, so this run takes longer than its budget (a larger budget_s buys more steps)"
            )
        return f"{plan}, within budget_s={self.budget_s:g}"


def plan_blocks(
    budget_s: float,
    seconds_per_pair: float,
    *,
    blocks: int = 3,
    minimum: int = MINIMUM_STEPS,
    steps: int | None = None,
    settle: int = 0,
) -> Plan:
    """Steps per block bought by `budget_s` (split over `blocks` fed + pre-made pairs, each opening with `settle`
    untimed steps), at least `minimum`; `steps` fixes them instead."""
    bought = int(budget_s / max(blocks * seconds_per_pair, 1e-9)) - settle
    chosen = steps if steps is not None else max(minimum, bought)
    return Plan(budget_s, blocks, chosen, seconds_per_pair, minimum, settle)


def copy_ms(batch: Any, device: torch.device, *, repeats: int = 5) -> float | None:
    """Median milliseconds to copy one batch, as the loader yields it (pinned or not), to a CUDA device, synchronised;
    None when the step is not on CUDA or the batch is already there (no host-to-device copy to time)."""
    if device.type != "cuda" or device_of(batch).type != "cpu":
        return None
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = clock()
        to_device(batch, device)
        synchronize(device)
        times.append(1000 * (clock() - start))
    return statistics.median(times)


@dataclass
class Diagnosis:
    """What the doctor measured on one loader feeding one step, what it concludes, how sure, and what to try."""

    verdict: str  # INPUT-BOUND, LOADER COMPETES WITH THE STEP, TRANSFER-BOUND, COMPUTE-BOUND or INCONCLUSIVE
    finding: Finding  # the verdict with how sure it is and why not more so
    shares: Shares  # the medians as printed, which decided the verdict
    readings: list[str]  # the verdict each block pair read on its own
    data_wait_ms: Spread  # mean per fed step: the median of the blocks' means, with the lowest and highest
    compute_ms: Spread  # the same for the step itself
    efficiency: Spread  # pre-made over fed step time, per block pair
    premade_step_ms: Spread  # the step on pre-made batches: undisturbed by the loader
    fed_samples_per_s: Spread  # the loader feeding the step, end to end
    pipeline: PipelineFacts
    load: str  # what the rest of the machine did during the timed blocks, or why that is unknown
    trained_steps: int  # steps of the reader's step that ran: the model it measured has trained this much
    seconds: float
    budget_s: float
    method: str  # which measurement: diagnose's controlled comparison, or your own loop watched
    measured: str  # what that measurement timed, in words
    plan: str = ""  # how the budget was spent
    copy_in_wait: bool = False
    result: PipelineResult | None = None  # the controlled comparison's probe result
    stopped: str = ""  # how a watched script was stopped
    replayed_steps: int = 0  # a watched loop's steps on replayed batches
    advice: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def confidence(self) -> str:
        """'sure', 'fairly sure' or 'not sure'."""
        return self.finding.confidence

    @property
    def headline(self) -> str:
        """The first line: the verdict, how sure, and the numbers it rests on, each with its range over blocks."""
        return (
            f"{self.verdict} ({self.confidence}): efficiency {efficiency_text(self.efficiency)} over "
            f"{len(self.readings)} block pair{'s' * (len(self.readings) != 1)}{ms_efficiency_note(self.efficiency, self.shares)}; "
            f"{shares_text(self.shares, copy_in_wait=self.copy_in_wait)} "
            f"(data-wait {self.data_wait_ms.text(1)} ms, compute {self.compute_ms.text(1)} ms, against "
            f"{self.premade_step_ms.text(1)} ms per step on pre-made batches)."
        )

    def _trained(self) -> str:
        if self.result is None:  # a watched loop: the run was a measurement
            return (
                f"It trained your model: {self.trained_steps} optimizer steps ran, {self.replayed_steps} of them on "
                "replayed batches; keep the weights of a run the doctor did not stop."
            )
        return (
            f"It trained the model it measured: {self.trained_steps} steps ran (weights and optimizer state changed). "
            f"{COPY_HOWTO}"
        )

    def __str__(self) -> str:
        return "\n".join(
            [
                self.headline,
                f"How sure: {self.finding.how_sure()}.",
                f"Measured: {self.method}: {self.measured}",
                f"Pipeline: {self.pipeline.summary()}.",
                f"Machine: {self.load}.",
                *([self.stopped] if self.stopped else []),
                self._trained(),
                *self.notes,
                "Try, in order:" if self.advice else "Nothing to try on this reading.",
                *self.advice,
                f"Budget: {self.plan}; measured in {self.seconds:.1f} s with the warm-up.",
            ]
        )


def build_diagnosis(
    blocks: dict[str, list[float]],
    facts: PipelineFacts,
    load: LoadReading | None,
    *,
    copy: float | None = None,
    copy_in_wait: bool = False,
    **report: Any,
) -> Diagnosis:
    """A Diagnosis from per-block-pair numbers ("wait", "compute", "premade" ms per step, "efficiency", "fed"
    samples/s): each pair read on its own, the verdict from the medians as printed, how sure from how many pairs
    agree and the load; `report` gives the rest of Diagnosis's fields (trained_steps, seconds, budget_s, method...)."""
    columns = [blocks[key] for key in ("wait", "compute", "premade", "efficiency")]
    readings = [
        classify(Shares.of(w, c, p, efficiency=e, copy_ms=copy, copy_in_wait=copy_in_wait))
        for w, c, p, e in zip(*columns)
    ]
    wait, compute, premade, efficiency = (Spread.of(values) for values in columns)
    shares = Shares.of(
        wait.median,
        compute.median,
        premade.median,  # the label reads the medians it prints: their efficiency, pre-made / (wait + compute)
        copy_ms=copy,
        copy_in_wait=copy_in_wait,
    )
    busy = "the machine was busy (its line below says how busy)" if load is not None and load.busy else ""
    finding = most_likely(shares, readings, busy_note=busy)
    other_cores = load.other_cores if load is not None else None
    return Diagnosis(
        finding.label,
        finding,
        shares,
        readings,
        wait,
        compute,
        efficiency,
        premade,
        Spread.of(blocks["fed"]),
        facts,
        load.note() if load is not None else "other processes' CPU use was not measured",
        copy_in_wait=copy_in_wait,
        advice=advice_for(finding.label, facts, other_cores=other_cores),
        notes=notes_for(facts),
        **report,
    )


Notify = Callable[[str], None]
