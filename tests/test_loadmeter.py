"""The load meter (CPU the rest of the machine used during a measurement) and the CPU budget (workers + threads)."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest
import torch

from helpers.loadmeter import (
    LoadMeter,
    LoadReading,
    busy_cores,
    combine,
    cpu_budget,
    intra_op_threads,
    machine_cpu_seconds,
    tree_cpu_seconds,
)

SPIN = "import time\nend = time.time() + {s}\nwhile time.time() < end: pass\n"


def _readers(*values):
    return iter(values).__next__


def test_other_cores_are_all_cpu_time_minus_this_trees_over_the_wall_time():
    meter = LoadMeter(
        machine=_readers(100.0, 104.0), tree=_readers(10.0, 12.4), wall=_readers(5.0, 7.0), loadavg=lambda: 1.5, cores=2
    )
    meter.start()
    reading = meter.stop()
    assert reading.other_cores == pytest.approx((4.0 - 2.4) / 2.0) and reading.seconds == 2.0
    assert (
        reading.busy
        and reading.note() == "other processes used 0.8 of 2 cores during this measurement; load average 1.5"
    )
    quiet = LoadMeter(
        machine=_readers(0.0, 1.0), tree=_readers(0.0, 1.0), wall=_readers(0.0, 1.0), loadavg=lambda: None, cores=4
    )
    quiet.start()
    assert not quiet.stop().busy and quiet.total().other_cores == 0.0
    assert "load average" not in quiet.total().note()


def test_readings_combine_weighted_by_their_seconds():
    both = combine([LoadReading(1.0, 2, 3.0, 0.5), LoadReading(0.0, 2, 1.0, 2.0)])
    assert both.other_cores == pytest.approx(0.75) and both.seconds == 4.0 and both.load_average == 2.0
    assert combine([]) is None
    with pytest.raises(RuntimeError):
        LoadMeter().stop()


def test_a_busy_child_counts_as_this_tree_and_an_unrelated_busy_process_as_other():
    # direction, not speed: on a loaded machine the spinning processes get what CPU they get, and we compare with that
    before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    tree0 = tree_cpu_seconds()
    subprocess.run([sys.executable, "-c", SPIN.format(s=0.8)], check=True)  # a child: reaped into this tree
    after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_cpu = (after_children.ru_utime + after_children.ru_stime) - (
        before_children.ru_utime + before_children.ru_stime
    )
    tree1 = tree_cpu_seconds()
    assert child_cpu > 0.05 and tree1 - tree0 >= 0.9 * child_cpu

    # an unrelated process: started through a shell that exits, so it is no descendant of this one
    launcher = subprocess.run(
        ["sh", "-c", f'{sys.executable} -c "$0" >/dev/null 2>&1 & echo $!', SPIN.format(s=3)],
        capture_output=True,
        text=True,
        check=True,
    )
    unrelated = psutil.Process(int(launcher.stdout.strip()))
    try:
        assert unrelated.pid not in {p.pid for p in psutil.Process().children(recursive=True)}
        u0, t0, m0 = sum(unrelated.cpu_times()[:2]), tree_cpu_seconds(), machine_cpu_seconds()
        time.sleep(1.0)
        u1, t1, m1 = sum(unrelated.cpu_times()[:2]), tree_cpu_seconds(), machine_cpu_seconds()
    finally:
        unrelated.kill()
    spun = u1 - u0
    assert spun > 0.05
    assert (m1 - m0) - (t1 - t0) >= 0.8 * spun  # the meter's "other": includes the unrelated process's CPU
    assert t1 - t0 < 0.5 * spun  # ... which this tree (sleeping meanwhile) does not hold


def test_the_cpu_budget_leaves_the_main_process_a_core_and_fills_the_rest_with_threads():
    assert cpu_budget(2, 2) == (1, 1) and cpu_budget(4, 8) == (4, 4) and cpu_budget(0, 4) == (0, 4)
    assert cpu_budget(3, 1) == (0, 1)
    for workers in range(6):
        for cores in range(1, 9):
            w, t = cpu_budget(workers, cores)
            assert w + t <= cores and t >= 1 and w <= workers


def test_the_cpu_budget_leaves_the_cores_other_processes_keep_busy():
    # the busy-laptop case: another process on one of 2 cores leaves the timed process one intra-op thread
    assert (
        cpu_budget(0, 2, busy=1) == (0, 1) and cpu_budget(0, 8, busy=3) == (0, 5) and cpu_budget(2, 8, busy=3) == (2, 3)
    )
    assert cpu_budget(0, 2, busy=5) == (0, 1)  # never fewer than one thread


def _sampled(other_cores):
    """A meter whose one interval (1 s of wall time) saw other processes use `other_cores` cores."""
    return LoadMeter(machine=_readers(0.0, other_cores), tree=_readers(0.0, 0.0), wall=_readers(0.0, 1.0), cores=4)


def test_busy_cores_rounds_the_other_processes_cpu_to_whole_cores_and_leaves_this_process_one():
    slept = []
    assert busy_cores(0.25, meter=_sampled(0.96), sleep=slept.append) == 1 and slept == [0.25]
    assert busy_cores(meter=_sampled(0.3), sleep=lambda s: None) == 0  # a browser tab is not a busy core
    assert busy_cores(meter=_sampled(1.6), sleep=lambda s: None) == 2
    assert busy_cores(meter=_sampled(7.0), sleep=lambda s: None) == 3  # at most all but one of the 4 cores


def test_intra_op_threads_are_restored_even_when_the_block_raises():
    before = torch.get_num_threads()
    with intra_op_threads(1) as threads:
        assert threads == torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError), intra_op_threads(1):
        raise ValueError
    assert torch.get_num_threads() == before


def test_the_machine_reading_counts_only_the_cpus_this_process_may_use(monkeypatch):
    from collections import namedtuple

    import helpers.loadmeter as loadmeter

    Times = namedtuple("Times", "user system idle iowait")
    per_cpu = [Times(10.0, 5.0, 100.0, 1.0), Times(1.0, 1.0, 100.0, 0.0), Times(7.0, 0.0, 100.0, 0.0)]
    total = Times(18.0, 6.0, 300.0, 1.0)
    monkeypatch.setattr(loadmeter.psutil, "cpu_times", lambda percpu=False: per_cpu if percpu else total)
    monkeypatch.setattr(loadmeter, "usable_cpus", lambda: [0, 2])
    assert machine_cpu_seconds() == 15.0 + 7.0  # CPU 1 is outside this process's affinity
    monkeypatch.setattr(loadmeter, "usable_cpus", lambda: [0, 1, 2])
    assert machine_cpu_seconds() == 24.0 and LoadMeter().cores == 3


def test_a_with_block_is_one_interval_of_the_meter():
    meter = LoadMeter(
        machine=_readers(0.0, 3.0, 3.0, 3.5),
        tree=_readers(0.0, 1.0, 1.0, 1.5),
        wall=_readers(0.0, 2.0, 2.0, 3.0),
        loadavg=lambda: None,
        cores=2,
    )
    with meter as same:
        assert same is meter
    with pytest.raises(ValueError), meter:  # an error inside still closes the interval
        raise ValueError
    assert [r.other_cores for r in meter.readings] == [1.0, 0.0] and meter.total().seconds == 3.0


def test_a_reading_never_exceeds_the_machines_cores():
    """CPU-time counters tick at their own moments: a short interval can count more than the cores had."""
    machine, tree, wall = iter([0.0, 5.0]), iter([0.0, 0.0]), iter([0.0, 1.0])
    meter = LoadMeter(machine=lambda: next(machine), tree=lambda: next(tree), wall=lambda: next(wall), cores=2)
    meter.start()
    assert meter.stop().other_cores == 2.0


def test_a_block_is_busy_from_the_threshold_on():
    from helpers.loadmeter import BUSY_CORES, LoadReading

    assert LoadReading(BUSY_CORES, 2, 1.0).busy and not LoadReading(BUSY_CORES - 0.01, 2, 1.0).busy


class _Process:
    def __init__(self, user: float, system: float, reaped: float, children=()) -> None:
        self.times = SimpleNamespace(user=user, system=system, children_user=reaped, children_system=0.0)
        self.kids = list(children)

    def cpu_times(self):
        return self.times

    def children(self, recursive: bool = False):
        if not recursive:
            return list(self.kids)
        return [d for kid in self.kids for d in (kid, *kid.children(recursive=True))]


class TestProcessTreeCpuSeconds:
    """tree_cpu_seconds sums this process, every descendant (grandchildren too) and the children this process reaped,
    each once."""

    def test_the_tree_counts_grandchildren_and_reaped_children_once(self):
        grandchild = _Process(4.0, 0.0, 100.0)
        child = _Process(2.0, 0.5, 100.0, [grandchild])  # a descendant's reaped children are in its parent's times
        root = _Process(1.0, 0.25, 8.0, [child])
        assert tree_cpu_seconds(root) == pytest.approx(1.25 + 8.0 + 2.5 + 4.0)  # type: ignore[arg-type]
