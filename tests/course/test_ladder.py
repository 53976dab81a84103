"""The ladder engine: one rung's workers alive at a time within the CPU budget, rounds that stop at the budget, rows
whose efficiency is what the table prints, and each rung's own peak device memory."""

from __future__ import annotations

import dataclasses

import torch

EARLIER: set[int] = set()  # child processes that other tests left: not a rung's workers


def _worker_rung(name, seen):
    import psutil
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from helpers.course.ladder import Rung

    def build():
        data = TensorDataset(torch.zeros(64, 3), torch.zeros(64, 1))
        return DataLoader(data, batch_size=4, num_workers=1, persistent_workers=True)

    def make_step(model):
        def step(batch):
            alive = [
                c
                for c in psutil.Process().children(recursive=True)
                if c.pid not in EARLIER and c.status() != psutil.STATUS_ZOMBIE
            ]
            seen.append((name, len(alive), torch.get_num_threads()))
            model(batch[0]).sum().backward()

        return step

    return Rung(name, build, lambda: nn.Linear(3, 1), workers=1, make_step=make_step, role=name)


def test_only_the_rung_whose_turn_it_is_has_live_workers_and_threads_are_restored(capsys, monkeypatch):
    import psutil

    from helpers.course import ladder
    from helpers.course.ladder import run_ladder
    from helpers.env import usable_cpu_count

    monkeypatch.setattr(ladder, "busy_cores", lambda: 0)  # a quiet machine (the busy case: the test below)
    seen, before = [], torch.get_num_threads()
    EARLIER.clear()
    EARLIER.update(c.pid for c in psutil.Process().children(recursive=True))  # left by other tests: not the rungs'
    rows, timing = run_ladder(
        [_worker_rung("a", seen), _worker_rung("b", seen)], device=torch.device("cpu"), rounds=3, turn_s=0.05
    )
    assert torch.get_num_threads() == before  # restored after the ladder
    assert {name for name, _, _ in seen} == {"a", "b"}
    assert max(alive for _, alive, _ in seen) == 1  # its own worker, never the other rung's as well
    assert {threads for _, _, threads in seen} == {max(1, usable_cpu_count() - 1)}  # the workers' core left to them
    assert "CPU budget on" in timing and "1 worker + " in timing and "for 'a', 'b'" in timing
    assert [
        c
        for c in psutil.Process().children(recursive=True)
        if c.pid not in EARLIER and c.status() != psutil.STATUS_ZOMBIE
    ] == []
    assert [r.role for r in rows] == ["a", "b"] and all(r.load and r.load["cores"] >= 1 for r in rows)


def test_a_ladder_leaves_the_cores_other_processes_keep_busy(monkeypatch):
    from helpers.course import ladder

    monkeypatch.setattr(ladder, "usable_cpu_count", lambda: 4)
    monkeypatch.setattr(ladder, "busy_cores", lambda: 1)  # one core taken by another process as the ladder starts
    seen = []
    _, timing = ladder.run_ladder([_worker_rung("a", seen)], device=torch.device("cpu"), rounds=3, turn_s=0.05)
    assert {threads for _, _, threads in seen} == {2}  # 4 cores - its 1 worker - 1 busy core
    assert (
        "(1 kept busy by other processes as the ladder started)" in timing and "1 worker + 2 threads for 'a'" in timing
    )


def test_a_ladder_rows_efficiency_is_its_printed_fed_median_over_its_printed_premade_median():
    # 04's table printed an efficiency (the median of per-round ratios) that the fed and pre-made columns beside it
    # contradicted: dividing the two printed medians must give the printed efficiency, its range the rounds' ratios
    from torch import nn

    from helpers.course.ladder import Rung, _row, _Turn, ladder_table
    from helpers.measure import PipelineProbe

    probe = PipelineProbe([(torch.zeros(4, 3), torch.zeros(4, 1))], lambda batch: None, torch.device("cpu"), premade=1)
    probe.alone = [(1.0, 500), (1.0, 600), (1.0, 700)]
    probe.fed = [(1.0, 100), (1.0, 300), (1.0, 200)]  # median 200
    probe.premade = [(1.0, 200), (1.0, 200), (1.0, 1000)]  # median 200; the rounds' ratios 0.5, 1.5, 0.2
    probe.waits, probe.computes = [[0.01]] * 3, [[0.02]] * 3
    rung = Rung("r", lambda: [], lambda: nn.Identity(), role="r")
    row = _row(_Turn(rung, probe), cores=2)
    assert row.fed_samples_per_s == 200 and row.premade_samples_per_s == 200
    assert row.pipeline_efficiency == 1.0 and row.efficiency_range == (0.2, 1.5)
    row.loader_vs_first = 1.0
    table = ladder_table([row])
    assert "| 200 (100–300) | 200 (200–1000) | 1.00 (0.20–1.0 within noise; max 1.50) |" in table
    assert "efficiency is the fed median over the pre-made median" in table
    assert "differ with their intra-op threads" not in table  # one rung: nothing to explain
    other = dataclasses.replace(row, name="w", threads=1, workers=1)
    row.threads = 2
    assert "differ with their intra-op threads (the CPU budget" in ladder_table([row, other])
    assert "'r' 2 threads, 'w' 1 thread" in ladder_table([row, other])
    assert "differ with their intra-op threads" not in ladder_table(
        [row, dataclasses.replace(other, model_note="another")]
    )


def test_a_ladder_rows_milliseconds_are_those_of_its_median_rounds_so_they_give_its_efficiency():
    # a reader divided the pre-made step by wait + fed step and got 0.89 beside a printed 0.98: pooled means over
    # rounds carried one slow round the medians did not
    from torch import nn

    from helpers.course.ladder import Rung, _row, _Turn
    from helpers.measure import PipelineProbe

    probe = PipelineProbe([(torch.zeros(4, 3), torch.zeros(4, 1))], lambda batch: None, torch.device("cpu"), premade=1)
    probe.alone = [(1.0, 500)] * 3
    probe.fed = [(0.05, 4), (0.5, 4), (0.1, 4)]  # 80, 8 (a slow round) and 40 samples/s: median 40
    probe.premade = [(0.04, 4), (0.08, 4), (0.05, 4)]  # 100, 50 and 80 samples/s: median 80
    probe.waits = [[0.01], [0.45], [0.02]]  # the slow round waited
    probe.computes = [[0.04], [0.05], [0.08]]
    row = _row(_Turn(Rung("r", lambda: [], lambda: nn.Identity(), role="r"), probe), cores=2)
    assert (round(row.data_wait_ms, 6), round(row.compute_ms, 6)) == (20.0, 80.0)  # the 40-samples/s round
    assert round(row.premade_step_ms, 6) == 50.0  # the 80-samples/s round's step
    assert row.pipeline_efficiency == 0.5 == row.premade_step_ms / (row.data_wait_ms + row.compute_ms)


def test_rounds_stop_at_the_budget_after_the_minimum_and_the_bar_ends_where_they_stopped(monkeypatch):
    from torch import nn

    from helpers.course import ladder
    from helpers.course.ladder import MIN_ROUNDS, Rung

    bars = []

    class RecordingBar:
        def __init__(self, iterable=None, total=None, **kwargs):
            self.iterable, self.total, self.n, self.desc = iterable, total, 0, kwargs.get("desc")
            bars.append(self)

        def __iter__(self):
            return iter(self.iterable)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, count):
            self.n += count

        def refresh(self):
            pass

    def build():
        return [(torch.zeros(4, 3), torch.zeros(4, 1))] * 4

    def make_step(model):
        return lambda batch: model(batch[0]).sum().backward()

    rung = Rung("quick", build, lambda: nn.Linear(3, 1), workers=0, make_step=make_step, role="quick")
    monkeypatch.setattr(ladder, "tqdm", RecordingBar)
    monkeypatch.setattr(ladder, "busy_cores", lambda: 0)
    # a budget of 8 rounds x 2 rungs x 1 µs: every round past the minimum would pass it
    rows, timing = ladder.run_ladder([rung, rung], device=torch.device("cpu"), rounds=8, turn_s=1e-6)
    (rounds_bar,) = [bar for bar in bars if bar.desc == "ladder rounds"]
    assert f"{MIN_ROUNDS} of 8 rounds took" in timing
    assert rounds_bar.n == rounds_bar.total == MIN_ROUNDS * 2  # ends at what ran, not at 16
    assert all(row.rounds == MIN_ROUNDS for row in rows)


def test_the_doctor_reads_the_efficiency_the_table_prints(monkeypatch):
    """Fed median over pre-made median (80 / 100 = 0.8), with its range: not the probe's own median of block ratios
    (0.5 here), which a reader cannot compute from the table."""
    import types

    from helpers.course import ladder
    from helpers.pipeline_result import PipelineResult

    fed = PipelineResult(80.0, 100.0, 0.5, 1.0, 4.0, 10, 100.0, None, efficiency_range=(0.7, 0.9))
    rates = {"alone": [200.0, 210.0, 190.0], "fed": [80.0, 78.0, 82.0], "premade": [100.0, 99.0, 101.0]}
    probe = types.SimpleNamespace(
        result=lambda: fed,
        rates=lambda kind: rates[kind],
        premade=[(1.0, 100), (1.0, 99), (1.0, 101)],
        waits=[[0.0015]] * 3,
        computes=[[0.004]] * 3,
        batch_samples=4,
    )
    rung = types.SimpleNamespace(name="r", role="r", bounds="", model_note="", workers=2)
    read = []
    monkeypatch.setattr(ladder, "diagnose_pipeline", lambda result, **kwargs: read.append(result) or "VERDICT\nwhy")
    row = ladder._row(ladder._Turn(rung, probe, threads=1), cores=4)
    assert row.pipeline_efficiency == 0.8 and row.efficiency_range == (0.7, 0.9) and row.doctor == "VERDICT"
    assert read[0].pipeline_efficiency == 0.8 and read[0].efficiency_range == (0.7, 0.9)


def test_each_rungs_peak_device_memory_is_its_own(monkeypatch):
    """A rung's "peak GPU MiB" is what it holds (its data and model, made when it is built) plus the most its steps
    allocate beyond what was held when a block started: not the process's maximum, which the 224-px batch search
    and the other rungs set."""
    from torch import nn

    from helpers import measure
    from helpers.course import ladder
    from helpers.course.ladder import Rung
    from tests.test_measure import SimulatedAllocator

    memory = SimulatedAllocator(monkeypatch, measure, ladder)
    monkeypatch.setattr(ladder, "busy_cores", lambda: 0)
    memory.allocate(10**6)
    memory.allocate(-(10**6))  # the batch search's peak, freed

    def rung(name: str, held: int, transient: int) -> Rung:
        def build():
            memory.allocate(held)  # its data on the device, kept while the ladder runs
            return [(torch.zeros(4, 3), torch.zeros(4, 1))] * 4

        def make_step(model):
            def step(batch):
                memory.allocate(transient)
                memory.allocate(-transient)

            return step

        return Rung(name, build, lambda: nn.Linear(3, 1), workers=0, make_step=make_step, role=name)

    rows, _ = ladder.run_ladder(
        [rung("a", 4000, 300), rung("b", 1000, 800)], device=torch.device("cpu"), rounds=3, turn_s=0.01
    )
    assert [(row.peak_device_mib or 0) * 2**20 for row in rows] == [4300, 1800]


def test_the_ms_columns_add_up_to_the_printed_rates_with_an_even_count_of_rounds():
    # reader 3, 07 'post': 4 of 5 rounds ran, the medians averaged two rounds and the ms came from one
    from types import SimpleNamespace

    import pytest

    from helpers.course.ladder import _median_round_ms

    fed = [8.0, 9.0, 10.0, 12.0]  # samples/s per round; batch 16
    probe = SimpleNamespace(
        rates=lambda kind: fed,
        waits=[[0.2], [0.1], [0.05], [0.02]],
        computes=[[1.8], [1.7], [1.55], [1.3]],
        batch_samples=16,
    )
    wait, compute, premade = _median_round_ms(probe, 9.5, 14.0)
    assert wait + compute == pytest.approx(16_000 / 9.5) and premade == pytest.approx(16_000 / 14.0)
    assert wait / (wait + compute) == pytest.approx(0.075 / (0.075 + 1.625))  # the two middle rounds' split
    assert premade / (wait + compute) == pytest.approx(9.5 / 14.0)  # so the columns give fed / pre-made
