"""Seeds: one call that seeds every generator, and a distinct, reproducible seed for each distributed rank.

Example:
    >>> _ = seed_everything(0)  # Python, NumPy and torch; returns a torch.Generator seeded the same
    >>> first = torch.rand(2)
    >>> _ = seed_everything(0)
    >>> torch.equal(first, torch.rand(2)), rank_seed(0, rank=0) != rank_seed(0, rank=1)
    (True, True)

Copy alone.
Needs: numpy, torch.
"""

from __future__ import annotations

import random

import numpy as np
import torch

RANK_SEED_STRIDE = 1_000_003  # a prime gap between ranks' seeds, so ranks never share a stream


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch (CPU and CUDA) with `seed`; return a torch.Generator seeded the same."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    return torch.Generator().manual_seed(seed)


def rank_seed(seed: int, rank: int) -> int:
    """A different, reproducible seed for each rank (for augmentation and any other per-process randomness)."""
    return seed + RANK_SEED_STRIDE * rank
