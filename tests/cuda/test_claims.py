"""Lesson 05's memory claims on CUDA: the allocator keeps what `del` frees until empty_cache(), and a loss kept
with its graph grows allocated memory where a detached one does not."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.course.claims import allocator_rows, amp_memory_rows

pytestmark = pytest.mark.cuda


def test_del_frees_into_the_cache_and_empty_cache_returns_it(cuda):
    rows = {r["what"]: r for r in allocator_rows(cuda)}
    made, freed, emptied = rows["a 256 MiB tensor allocated"], rows["after del"], rows["after del, then empty_cache()"]
    assert made["allocated_mib"] - freed["allocated_mib"] >= 255
    assert freed["reserved_mib"] == made["reserved_mib"] and emptied["reserved_mib"] <= freed["reserved_mib"] - 255
    loops = [r for r in rows.values() if "forward passes" in r["what"]]
    graph, detached = loops[0]["allocated_mib"], loops[1]["allocated_mib"]
    assert graph > detached + 16  # eight graphs of activations against eight scalars


def test_amp_memory_rows_measure_each_precision(cuda):
    batch = (torch.rand(4, 3, 32, 32), torch.rand(4, 3, 32, 32))
    rows = amp_memory_rows(lambda: nn.Conv2d(3, 3, 3, padding=1), batch, cuda, ["fp32", "fp16"])
    assert [r["precision"] for r in rows] == ["fp32", "fp16"] and all(r["peak_mib"] > 0 for r in rows)
