"""The doctor's per-block readings: a step that loses less to running slower than to waiting is input-bound, not
competing; each block pair's wait is that block's own median, not a running one; the loader's workers are stopped
during each pre-made block and restarted (untimed) before the next fed one."""

from __future__ import annotations

import torch

from helpers import doctor
from helpers.bottleneck import COMPETES, INPUT_BOUND, Shares, classify


def test_waiting_more_than_slowing_down_is_input_bound():
    assert classify(Shares.of(50.0, 13.0, 10.0)) == INPUT_BOUND  # 3 ms slower, 50 ms waiting
    assert classify(Shares.of(1.0, 13.0, 10.0)) == COMPETES  # 3 ms slower (30%), 1 ms waiting


class _Probe:
    """Fed blocks whose steps wait 1, 10 and 100 ms in turn (compute 5 ms), pre-made steps 5 ms."""

    workers = 1

    def __init__(self) -> None:
        self.batches, self.waits, self.computes, self.block, self.events = [torch.zeros(2, 3)], [], [], 0, []

    def pause(self) -> None:
        self.events.append("pause")

    def drain(self, batches=None) -> None:
        self.events.append("drain")

    def fed_block(self, steps: int) -> float:
        self.events.append("fed")
        wait = (0.001, 0.010, 0.100)[self.block]
        self.block += 1
        self.waits.append([wait] * steps)
        self.computes.append([0.005] * steps)
        return 2 / (wait + 0.005)

    def premade_block(self, steps: int) -> float:
        self.events.append("premade")
        return 2 / 0.005


def test_each_block_pairs_wait_is_its_own():
    probe = _Probe()
    numbers = doctor._block_numbers(probe, 3, 4)  # type: ignore[arg-type]
    assert probe.events == ["fed", "pause", "premade", "drain"] * 2 + ["fed", "pause", "premade"]
    assert [round(w, 6) for w in numbers["wait"]] == [1.0, 10.0, 100.0]
    assert [round(c, 6) for c in numbers["compute"]] == [5.0, 5.0, 5.0]
    assert [round(e, 6) for e in numbers["efficiency"]] == [round(0.005 / (w + 0.005), 6) for w in (0.001, 0.01, 0.1)]
