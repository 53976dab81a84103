"""The doctor's per-block readings: a step that loses less to running slower than to waiting is input-bound, not
competing; each block pair's wait is that block's own median, not a running one."""

from __future__ import annotations

import torch

from helpers import doctor
from helpers.doctor import COMPETES, INPUT_BOUND, classify


def test_waiting_more_than_slowing_down_is_input_bound():
    assert classify(0.5, 50.0, 13.0, 10.0) == INPUT_BOUND  # 3 ms slower, 50 ms waiting
    assert classify(0.5, 1.0, 13.0, 10.0) == COMPETES  # 3 ms slower, 1 ms waiting


class _Probe:
    """Fed blocks whose steps wait 1, 10 and 100 ms in turn (compute 5 ms), pre-made steps 5 ms."""

    def __init__(self) -> None:
        self.batches, self.waits, self.computes, self.block = [torch.zeros(2, 3)], [], [], 0

    def fed_block(self, steps: int) -> float:
        wait = (0.001, 0.010, 0.100)[self.block]
        self.block += 1
        self.waits.append([wait] * steps)
        self.computes.append([0.005] * steps)
        return 2 / (wait + 0.005)

    def premade_block(self, steps: int) -> float:
        return 2 / 0.005


def test_each_block_pairs_wait_is_its_own():
    numbers = doctor._block_numbers(_Probe(), 3, 4)  # type: ignore[arg-type]
    assert [round(w, 6) for w in numbers["wait"]] == [1.0, 10.0, 100.0]
    assert [round(c, 6) for c in numbers["compute"]] == [5.0, 5.0, 5.0]
    assert [round(e, 6) for e in numbers["efficiency"]] == [round(0.005 / (w + 0.005), 6) for w in (0.001, 0.01, 0.1)]
