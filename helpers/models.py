"""Models the course trains: ESPCN and a small EDSR-style network for super-resolution, ResNet18 with the CIFAR stem,
a small CNN for CPU runs, and a patch discriminator for GAN super-resolution.

Example:
    >>> model = build_model("espcn", scale=2)  # by name, as the course's recipes choose it
    >>> describe_model("espcn", scale=2), model(torch.rand(1, 3, 16, 16)).shape
    ('ESPCN (scale 2)', torch.Size([1, 3, 32, 32]))
    >>> build_model("small", num_classes=10)(torch.rand(2, 3, 32, 32)).shape
    torch.Size([2, 10])

Copy with: resize.py (the bicubic skip is the same MATLAB bicubic as the baseline).
Needs: torch, torchvision.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torchvision.models import resnet18

from .resize import upscale


class ESPCN(nn.Module):
    """ESPCN (Shi et al., 2016): three convolutions on the LR image, then a pixel shuffle up to HR.

    With `scale=1` it is the same network on inputs already upscaled to HR size (the traditional pipeline's input).
    With `bicubic_skip` it predicts the residual over a bicubic upscale, which trains faster.
    """

    def __init__(
        self, scale: int = 4, *, channels: int = 3, features: tuple[int, int] = (64, 32), bicubic_skip: bool = False
    ) -> None:
        super().__init__()
        first, second = features
        self.scale, self.bicubic_skip = scale, bicubic_skip
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
        out = self.body(lr)
        if self.bicubic_skip and self.scale > 1:
            out = out + upscale(lr, self.scale)
        return out


class ResidualBlock(nn.Module):
    """EDSR's residual block: conv-ReLU-conv, no batch norm, the residual scaled before it is added."""

    def __init__(self, features: int, res_scale: float = 1.0) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(features, features, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(features, features, 3, padding=1),
        )
        self.res_scale = res_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x + res_scale * body(x)."""
        return x + self.body(x) * self.res_scale


class SmallEDSR(nn.Module):
    """An EDSR-baseline-style network (Lim et al., 2017) sized for a time budget: head conv, `blocks` residual
    blocks of `features` channels with a long skip, pixel-shuffle upsampler, tail conv, plus a bicubic skip.

    EDSR-baseline is 16 blocks of 64 features; 8 blocks of 32 features train usefully in minutes on a CPU.
    """

    def __init__(self, scale: int = 4, *, features: int = 32, blocks: int = 8, res_scale: float = 1.0) -> None:
        super().__init__()
        self.scale = scale
        self.head = nn.Conv2d(3, features, 3, padding=1)
        self.body = nn.Sequential(
            *[ResidualBlock(features, res_scale) for _ in range(blocks)], nn.Conv2d(features, features, 3, padding=1)
        )
        upsample: list[nn.Module] = []
        if scale in (2, 4):
            for _ in range(scale // 2):
                upsample += [nn.Conv2d(features, 4 * features, 3, padding=1), nn.PixelShuffle(2)]
        elif scale == 3:
            upsample += [nn.Conv2d(features, 9 * features, 3, padding=1), nn.PixelShuffle(3)]
        else:
            raise ValueError(f"scale must be 2, 3 or 4, not {scale}")
        self.upsample = nn.Sequential(*upsample)
        self.tail = nn.Conv2d(features, 3, 3, padding=1)

    def forward(self, lr: torch.Tensor) -> torch.Tensor:
        """Super-resolve a (N, 3, h, w) batch in [0, 1] to (N, 3, h*scale, w*scale)."""
        head = self.head(lr)
        features = head + self.body(head)
        residual = self.tail(self.upsample(features))
        return residual + upscale(lr, self.scale)


def cifar_resnet18(num_classes: int = 10) -> nn.Module:
    """torchvision's ResNet18 with the CIFAR stem: a 3x3 stride-1 first convolution and no max-pool (32-px inputs)."""
    model = resnet18(weights=None, num_classes=num_classes)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def imagenet_resnet18(num_classes: int = 1000) -> nn.Module:
    """torchvision's ResNet18 as published, ImageNet stem (7x7 stride-2 convolution and max-pool: 224-px inputs)."""
    return resnet18(weights=None, num_classes=num_classes)


class SmallConvNet(nn.Module):
    """A small CNN (four conv blocks, global pooling) for CPU benchmarks and smoke runs; any input size works."""

    def __init__(self, num_classes: int = 10, width: int = 32) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for multiplier in (1, 2, 4, 8):
            layers += [
                nn.Conv2d(channels, width * multiplier, 3, padding=1, bias=False),
                nn.BatchNorm2d(width * multiplier),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
            ]
            channels = width * multiplier
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, num_classes))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Class logits for a (N, 3, H, W) batch."""
        return self.head(self.features(images))


class PatchDiscriminator(nn.Module):
    """A small convolutional discriminator for GAN super-resolution: one realness logit per image patch."""

    def __init__(self, features: int = 32) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for multiplier in (1, 2, 4):
            layers += [nn.Conv2d(channels, features * multiplier, 4, stride=2, padding=1), nn.LeakyReLU(0.2, True)]
            channels = features * multiplier
        layers.append(nn.Conv2d(channels, 1, 3, padding=1))
        self.body = nn.Sequential(*layers)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Patch logits, (N, 1, H/8, W/8)."""
        return self.body(images)


# --- one home for the choice of network -------------------------------------------------------------------------

MODELS: dict[str, Callable[..., nn.Module]] = {
    "espcn": ESPCN,
    "small_edsr": SmallEDSR,
    "resnet18": cifar_resnet18,  # the CIFAR stem
    "resnet18_imagenet": imagenet_resnet18,  # 07's classifier of 224-px crops
    "small": SmallConvNet,
    "patch_discriminator": PatchDiscriminator,
}
DESCRIPTIONS = {
    "espcn": "ESPCN",
    "small_edsr": "SmallEDSR",
    "resnet18": "ResNet18 (CIFAR stem)",
    "small": "small CNN",
    "patch_discriminator": "patch discriminator",
    "resnet18_imagenet": "ResNet18 (torchvision, ImageNet stem)",
}


def build_model(name: str, **sizes: object) -> nn.Module:
    """The course's network called `name` (a key of MODELS), built with `sizes` as its keyword arguments; "small"
    defaults to width 16, the CPU stand-in for ResNet18."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}: choose one of {', '.join(MODELS)}")
    if name == "small":
        sizes = {"width": 16, **sizes}
    return MODELS[name](**sizes)


def describe_model(name: str, **sizes: object) -> str:
    """A short readable name for `build_model(name, **sizes)`, with its sizes."""
    shown = ", ".join(f"{key} {value}" for key, value in sizes.items())
    return f"{DESCRIPTIONS.get(name, name)}" + (f" ({shown})" if shown else "")
