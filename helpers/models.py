"""Models the course trains: ESPCN for super-resolution (more arrive with the training notebooks)."""

from __future__ import annotations

import torch
from torch import nn


class ESPCN(nn.Module):
    """ESPCN (Shi et al., 2016): three convolutions on the LR image, then a pixel shuffle up to HR.

    With `scale=1` it is the same network on inputs already upscaled to HR size (the traditional pipeline's input).
    """

    def __init__(self, scale: int = 4, channels: int = 3, features: tuple[int, int] = (64, 32)) -> None:
        super().__init__()
        first, second = features
        self.scale = scale
        self.body = nn.Sequential(
            nn.Conv2d(channels, first, 5, padding=2),
            nn.Tanh(),
            nn.Conv2d(first, second, 3, padding=1),
            nn.Tanh(),
            nn.Conv2d(second, channels * scale * scale, 3, padding=1),
            nn.PixelShuffle(scale),
        )

    def forward(self, lr: torch.Tensor) -> torch.Tensor:
        """Super-resolve a (N, C, h, w) batch to (N, C, h*scale, w*scale)."""
        return self.body(lr)
