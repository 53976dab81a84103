"""Seeds: one call seeds every generator reproducibly, for any int seed (NumPy takes it modulo 2**32), and each rank's
seed differs from every other rank's."""

from __future__ import annotations

import random
from itertools import pairwise

import numpy as np
import torch

from helpers.seeding import RANK_SEED_STRIDE, rank_seed, seed_everything


def _draws(generator: torch.Generator) -> tuple:
    return float(torch.rand(())), float(np.random.rand()), random.random(), float(torch.rand((), generator=generator))


def test_seed_everything_seeds_every_generator_the_same_way_each_time():
    first = _draws(seed_everything(11))
    assert _draws(seed_everything(11)) == first
    assert all(a != b for a, b in zip(first, _draws(seed_everything(12)), strict=True))
    torch.manual_seed(11)
    np.random.seed(11)
    random.seed(11)
    assert _draws(torch.Generator().manual_seed(11)) == first  # exactly the libraries' own seeding


def test_a_seed_past_32_bits_seeds_numpy_modulo_2_to_the_32():
    big = 2**32 + 5  # NumPy refuses seeds of 2**32 and more: the library folds them, the same way every time
    seed_everything(big)
    drawn = np.random.rand()
    np.random.seed(5)
    assert drawn == np.random.rand()


def test_rank_seeds_are_distinct_and_a_stride_apart():
    seeds = [rank_seed(3, rank) for rank in range(8)]
    assert len(set(seeds)) == 8 and seeds[0] == 3
    assert [b - a for a, b in pairwise(seeds)] == [RANK_SEED_STRIDE] * 7
    assert rank_seed(4, 0) != rank_seed(3, 1)  # neighbouring seeds do not collide with the next rank


class TestNumpyFoldAndCuda:
    """seed_everything folds seeds of 2**31 and more modulo 2**32 for NumPy (not 2**31), and seeds CUDA too."""

    def test_a_seed_between_2_to_the_31_and_2_to_the_32_reaches_numpy_unchanged(self):
        seed = 2**31 + 5
        seed_everything(seed)
        drawn = np.random.rand()
        np.random.seed(seed)
        assert drawn == np.random.rand()

    def test_cuda_is_seeded_where_it_is_available(self, monkeypatch):
        seeded: list[int] = []
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "manual_seed_all", seeded.append)
        monkeypatch.setattr(torch, "manual_seed", lambda seed: None)  # torch.manual_seed seeds CUDA itself: keep it out
        seed_everything(7)
        assert seeded == [7]
