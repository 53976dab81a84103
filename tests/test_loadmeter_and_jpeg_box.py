"""tree_cpu_seconds sums this process, every descendant (grandchildren too) and the children this process reaped,
each once; jpeg_crop.map_box scales by the exact power of two a reduced JPEG was decoded at."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from helpers.jpeg_crop import map_box
from helpers.loadmeter import tree_cpu_seconds


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


def test_the_tree_counts_grandchildren_and_reaped_children_once():
    grandchild = _Process(4.0, 0.0, 100.0)
    child = _Process(2.0, 0.5, 100.0, [grandchild])  # a descendant's reaped children are in its parent's times
    root = _Process(1.0, 0.25, 8.0, [child])
    assert tree_cpu_seconds(root) == pytest.approx(1.25 + 8.0 + 2.5 + 4.0)  # type: ignore[arg-type]


def test_a_box_maps_by_the_power_of_two_even_when_the_size_is_not_a_multiple():
    box = (40, 100, 200, 160)  # top, left, height, width
    full, reduced = (501, 375), (126, 94)  # libjpeg at 1/4: ceil(501 / 4), ceil(375 / 4)
    assert map_box(box, full, reduced) == (100 / 4, 40 / 4, 260 / 4, 240 / 4)
    assert map_box(box, full, full) == (100, 40, 260, 240)
