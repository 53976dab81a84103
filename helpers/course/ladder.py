"""The ladder engine: every rung of a pipeline measured side by side in one process (the loader alone, then feeding
the same model against pre-made batches), in interleaved rounds under one CPU budget, each number a median over rounds
with its range; the rows it returns and the table that prints them."""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from ..doctor import diagnose_pipeline
from ..env import usable_cpu_count
from ..loadmeter import busy_cores, cpu_budget, intra_op_threads
from ..measure import PipelineProbe, steps_in_budget
from ..memory import allocated_device_memory_bytes
from ..spread import Spread, efficiency_text
from .ladder_row import LadderRow
from .ladder_steps import sr_train_step
from .verdicts.ladder import busy_summary

MIN_ROUNDS = 3  # rounds a ladder always runs, past its budget if need be: one round has no spread to read


@dataclass
class Rung:
    """One rung of a loader ladder: a name, how to build its loader, the model its batches feed, and its step.

    `role` is what verdicts look the rung up by ("seed post", "native size", "device", "ceiling", ...), so an
    inserted rung cannot make a verdict compare the wrong loaders; a ceiling names in `bounds` the role it bounds.
    """

    name: str
    build: Callable[[], Iterable]
    model: Callable[[], nn.Module]
    workers: int = 0
    make_step: Callable[[nn.Module], Callable[[Any], Any]] = sr_train_step
    model_note: str = ""  # set when this rung's model differs from the others' (its fed rate is not like for like)
    prefetched: int | None = None  # batches drained untimed at each turn's start (None or 0: what its workers hold)
    role: str = ""
    bounds: str = ""


@dataclass
class _Turn:
    """A built rung, how many batches / steps one of its turns times, and its intra-op threads."""

    rung: Rung
    probe: PipelineProbe
    loader_batches: int = 1
    steps: int = 1
    threads: int = 1
    resident_bytes: int | None = None  # CUDA: what building the rung left allocated (model, optimizer, data, batches)


def _build(rung: Rung, device: torch.device, turn_s: float, cores: int, busy: int = 0) -> _Turn:
    """Build a rung's loader and model, warm them up, and size its turn to about `turn_s` seconds (at least one
    loader batch and one fed and one pre-made step: a rung slower than that takes longer, and the round count gives).
    Its workers are shut down until its first turn."""
    threads = _rung_threads(rung, cores, busy)
    torch.manual_seed(0)
    before = allocated_device_memory_bytes(device)  # the rungs built earlier, and anything else held already
    with intra_op_threads(threads):
        probe = PipelineProbe(
            rung.build(), rung.make_step(rung.model().to(device)), device, premade=2, warmup=max(1, rung.workers)
        )
        probe.drain(rung.prefetched or None)  # batches its workers made ahead would make the loader look instant
        seconds_per_batch = 2 / probe.loader_block(2) * probe.batch_samples
        probe.forget(loader=True)
        turn = _Turn(
            rung,
            probe,
            steps_in_budget(turn_s / 3, seconds_per_batch, maximum=200),
            steps_in_budget(2 * turn_s / 3, probe.seconds_per_pair(), maximum=100),
            threads,
        )
    probe.pause()
    if before is not None:
        turn.resident_bytes = (allocated_device_memory_bytes(device) or 0) - before
    return turn


def _peak_device_mib(turn: _Turn) -> float | None:
    """A rung's own peak device memory: what it holds (built) plus the most its turns' blocks allocated beyond what
    was held when each started; not the process's peak (another rung's, or the 224-px batch search's)."""
    if turn.resident_bytes is None:  # off CUDA
        return None
    above = turn.probe.peak_above_start_bytes()
    return None if above is None else (turn.resident_bytes + above) / 2**20


def _take_turn(turn: _Turn) -> None:
    """One turn: the rung's workers restarted untimed, its blocks timed with its thread budget, its workers stopped
    before its pre-made block (a baseline its own workers do not slow) and until its next turn (so that no other
    rung's workers share the cores while a turn is timed)."""
    with intra_op_threads(turn.threads):
        turn.probe.drain(turn.rung.prefetched or None)  # 0 (the old default) too: restarted workers need a draw
        turn.probe.loader_block(turn.loader_batches)
        turn.probe.block_pair(turn.steps, drain=0)  # its workers stopped during the pre-made block
    turn.probe.pause()


def _rung_threads(rung: Rung, cores: int, busy: int) -> int:
    """A rung's intra-op threads: the cores its workers and other processes' busy cores leave (at least one)."""
    return cpu_budget(rung.workers, cores, busy)[1]


def cpu_budget_text(rungs: list[Rung], cores: int, busy: int = 0) -> str:
    """The CPU budget each rung is measured under: its workers plus the timed process's intra-op threads, less the
    `busy` cores other processes kept busy when the ladder started; rungs under the same budget named together."""
    groups: dict[tuple[int, int], list[str]] = {}
    for r in rungs:
        groups.setdefault((r.workers, _rung_threads(r, cores, busy)), []).append(f"'{r.role or r.name}'")
    parts = [
        f"{workers} worker{'s' * (workers != 1)} + {threads} thread{'s' * (threads != 1)} for " + ", ".join(names)
        for (workers, threads), names in groups.items()
    ]
    others = f" ({busy} kept busy by other processes as the ladder started)" if busy else ""
    return f"CPU budget on {cores} cores{others}, workers + the step's intra-op threads: " + "; ".join(parts)


def run_ladder(
    rungs: list[Rung], *, device: torch.device, rounds: int, turn_s: float, busy: int | None = None
) -> tuple[list[LadderRow], str]:
    """Measure every rung side by side: all rungs are built, then up to `rounds` rounds give each rung a turn of about
    `turn_s` seconds (the loader alone, then fed and pre-made steps), the order rotating each round. A burst of load
    on the machine therefore hits every rung alike; each number is a median over rounds, with its range. After the
    first `MIN_ROUNDS` rounds (a range needs several), rounds stop once the next one would pass the budget
    (rounds x rungs x turn_s). Only the rung whose turn it is has live workers, with the intra-op threads its workers
    leave, less the cores other processes keep busy (`busy`, measured now when not given). Returns the rows and lines
    saying the CPU budget and how long building and measuring took."""
    started, cores = time.perf_counter(), usable_cpu_count()
    busy = busy_cores() if busy is None else busy
    turns = [_build(rung, device, turn_s, cores, busy) for rung in tqdm(rungs, desc="building rungs", unit="rung")]
    built, budget, done = time.perf_counter(), rounds * len(rungs) * turn_s, 0
    try:
        with tqdm(total=rounds * len(turns), desc="ladder rounds", unit="turn") as bar:
            while done < rounds and (done < MIN_ROUNDS or (time.perf_counter() - built) * (done + 1) / done <= budget):
                for turn in turns[done % len(turns) :] + turns[: done % len(turns)]:
                    _take_turn(turn)
                    bar.update(1)
                done += 1
            bar.total = bar.n  # rounds that stopped at the budget end the bar where it stands, not part-way
            bar.refresh()
        rows = [_row(turn, cores) for turn in turns]
    finally:
        for turn in turns:
            turn.probe.close()
    for row in rows:
        row.loader_vs_first = row.loader_samples_per_s / rows[0].loader_samples_per_s
    timing = (
        f"{cpu_budget_text(rungs, cores, busy)}\nbuilding and warming up the rungs took {built - started:.0f} s; "
        f"{done} of {rounds} rounds took {time.perf_counter() - built:.0f} s (budget {budget:.0f} s)"
    )
    return rows, timing


def _efficiency(fed: Spread, premade: Spread, per_round: tuple[float, float]) -> Spread:
    """A rung's efficiency as its table prints it: the fed median over the pre-made median (the two columns beside
    it, so dividing them gives it), with the range of the per-round ratios (each round's fed block over its own
    pre-made block), widened to the ratio of the medians in the rare case it falls outside them."""
    ratio = fed.median / premade.median
    return Spread(ratio, min(per_round[0], ratio), max(per_round[1], ratio), fed.n)


def _median_round_ms(probe: PipelineProbe, fed_median: float, premade_median: float) -> tuple[float, float, float]:
    """(data-wait, compute, pre-made step) ms that the printed medians imply: the fed median's step split into wait and
    compute as the median round (the two middle rounds' mean, for an even count) split it, and the pre-made median's
    step. So the columns give the efficiency beside them, whatever the count of rounds (pooled means would not, when
    one round ran slow)."""
    fed_rates = probe.rates("fed")
    order = sorted(range(len(fed_rates)), key=lambda i: fed_rates[i])
    middle = {order[(len(order) - 1) // 2], order[len(order) // 2]}
    waits = statistics.fmean(statistics.fmean(probe.waits[i]) for i in middle)
    computes = statistics.fmean(statistics.fmean(probe.computes[i]) for i in middle)
    fed_step = 1000 * probe.batch_samples / fed_median
    share = waits / (waits + computes) if waits + computes > 0 else 0.0
    return share * fed_step, (1 - share) * fed_step, 1000 * probe.batch_samples / premade_median


def _row(turn: _Turn, cores: int) -> LadderRow:
    probe, pooled = turn.probe, turn.probe.result()
    alone, fed_rate, premade = (Spread.of(probe.rates(kind)) for kind in ("alone", "fed", "premade"))
    efficiency = _efficiency(fed_rate, premade, pooled.efficiency_range or (fed_rate.median / premade.median,) * 2)
    wait, compute, premade_step = _median_round_ms(probe, fed_rate.median, premade.median)
    fed = dataclasses.replace(pooled, data_wait_ms=wait, compute_ms=compute, premade_step_ms=premade_step)
    busy = fed.load is not None and fed.load.busy
    # the doctor reads the numbers the table prints (the efficiency, the median rounds' ms), not a second set
    as_printed = dataclasses.replace(fed, pipeline_efficiency=efficiency.median, efficiency_range=efficiency.range)
    return LadderRow(
        name=turn.rung.name,
        role=turn.rung.role,
        bounds=turn.rung.bounds,
        model_note=turn.rung.model_note,
        workers=turn.rung.workers,
        threads=turn.threads,
        loader_samples_per_s=alone.median,
        loader_samples_per_s_range=alone.range,
        fed_samples_per_s=fed_rate.median,
        fed_samples_per_s_range=fed_rate.range,
        premade_samples_per_s=premade.median,
        premade_samples_per_s_range=premade.range,
        pipeline_efficiency=efficiency.median,
        efficiency_range=efficiency.range,
        data_wait_ms=fed.data_wait_ms,
        compute_ms=fed.compute_ms,
        premade_step_ms=fed.premade_step_ms,
        rounds=alone.n or 1,
        steps_per_turn=turn.steps,
        peak_device_mib=_peak_device_mib(turn),
        load=fed.load.as_dict() if fed.load else None,
        load_note=fed.load.note() if busy and fed.load else "",
        doctor=diagnose_pipeline(
            as_printed, num_workers=turn.rung.workers, cpu_cores=cores, threads=turn.threads
        ).splitlines()[0],
        loader_rounds=probe.rates("alone"),
        fed_rounds=probe.rates("fed"),
    )


def ladder_table(rows: list[LadderRow], label: str = "") -> str:
    """A markdown table of a ladder's rows: medians over rounds with their ranges; rungs with another model marked;
    efficiencies above 1 read as 1.0 within the noise; a note for each rung measured while the machine was busy."""
    lines = [
        f"{label}\n" if label else "",
        "| rung | loader alone, samples/s | × first | fed end to end, samples/s | pre-made, samples/s | efficiency, "
        "fed / pre-made | data-wait ms | step ms, fed / pre-made |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        mark = " †" if r.model_note else ""
        name = f"**{r.role}**: {r.name.removeprefix(r.role + ': ')}" if r.role else r.name  # verdicts say the role
        lines.append(
            f"| {name}{mark} | {r.loader.text()} | {r.loader_vs_first:.1f} | {r.fed.text()} | {r.premade.text()} | "
            f"{efficiency_text(r.efficiency, short=True)} | {r.data_wait_ms:.1f} | {r.compute_ms:.1f} / "
            f"{r.premade_step_ms:.1f} |"
        )
    notes = sorted({r.model_note for r in rows if r.model_note})
    lines += [f"\n† {note}" for note in notes]
    lines.append(
        f"\nmedians over {rows[0].rounds} interleaved rounds (range in brackets); efficiency is the fed median over "
        "the pre-made median, its range the lowest and highest ratio of one round's blocks; data-wait and step ms are "
        "means per step in the rounds of those medians, so pre-made / (data-wait + fed) is about the efficiency"
    )
    lines += _threads_notes(rows)
    busy = busy_summary(rows)
    lines += [f"measured on a busy machine: {busy}"] if busy else []
    return "\n".join(lines)


def _threads_notes(rows: list[LadderRow]) -> list[str]:
    """Why the pre-made rates of rungs that train the same model differ, where their intra-op threads do: a rung's
    workers take cores from its step (the CPU budget), so its pre-made baseline is that of fewer threads."""
    groups: dict[str, list[LadderRow]] = {}
    for row in rows:
        groups.setdefault(row.model_note, []).append(row)
    return [
        "pre-made rates of rungs that train the same model differ with their intra-op threads (the CPU budget gives "
        "a rung's step the cores its workers and other processes leave; each rung's efficiency is against its own "
        "baseline): " + ", ".join(f"'{r.name}' {r.threads} thread{'s' * (r.threads != 1)}" for r in same)
        for same in groups.values()
        if len({r.threads for r in same}) > 1
    ]


@dataclass
class LadderRun:
    """A ladder measured: its rows, the lines on its CPU budget and timing, its label, and what was decided first."""

    rows: list[LadderRow]
    timing: str
    label: str
    notes: list[str]
