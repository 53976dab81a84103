"""The SR ladder's rungs: their roles, and workers within the CPU budget."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image


def _photos(tmp_path, count=3):
    rng = np.random.default_rng(0)
    for i in range(count):
        Image.fromarray(rng.integers(0, 256, (130, 150, 3), dtype=np.uint8)).save(tmp_path / f"p{i}.png")
    return sorted(tmp_path.glob("*.png"))


def test_the_sr_ladder_keeps_its_workers_within_the_cpu_budget(tmp_path):
    from helpers.course.ladder_sr import sr_ladder
    from helpers.env import usable_cpu_count

    rungs = sr_ladder(_photos(tmp_path), device=torch.device("cpu"), batch_size=2, hr_crop=32, workers=64)
    assert all(r.workers + max(1, usable_cpu_count() - r.workers) <= max(2, usable_cpu_count()) for r in rungs)
    assert [r.role for r in rungs] == ["seed post", "in memory", "lazy crop", "lazy crop, workers", "decoded cache"]
