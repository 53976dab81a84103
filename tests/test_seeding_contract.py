"""seed_everything folds seeds of 2**31 and more modulo 2**32 for NumPy (not 2**31), and seeds CUDA too."""

from __future__ import annotations

import numpy as np
import torch

from helpers.seeding import seed_everything


def test_a_seed_between_2_to_the_31_and_2_to_the_32_reaches_numpy_unchanged():
    seed = 2**31 + 5
    seed_everything(seed)
    drawn = np.random.rand()
    np.random.seed(seed)
    assert drawn == np.random.rand()


def test_cuda_is_seeded_where_it_is_available(monkeypatch):
    seeded: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "manual_seed_all", seeded.append)
    monkeypatch.setattr(torch, "manual_seed", lambda seed: None)  # torch.manual_seed seeds CUDA itself: keep it out
    seed_everything(7)
    assert seeded == [7]
