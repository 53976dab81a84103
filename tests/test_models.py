"""Model shapes, the bicubic skip, and the CIFAR stem."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.metrics import bicubic_upscale
from helpers.models import ESPCN, PatchDiscriminator, SmallConvNet, SmallEDSR, cifar_resnet18


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_sr_models_upscale_by_their_scale(scale):
    lr = torch.rand(2, 3, 12, 10)
    assert SmallEDSR(scale, features=8, blocks=2)(lr).shape == (2, 3, 12 * scale, 10 * scale)
    assert ESPCN(scale)(lr).shape == (2, 3, 12 * scale, 10 * scale)


def test_a_zeroed_network_with_a_bicubic_skip_is_bicubic():
    lr = torch.rand(1, 3, 8, 8)
    for model in (ESPCN(4, bicubic_skip=True), SmallEDSR(4, features=8, blocks=1)):
        for parameter in model.parameters():
            nn.init.zeros_(parameter)
        torch.testing.assert_close(model(lr).clamp(0, 1), bicubic_upscale(lr, 4))


def test_cifar_resnet18_keeps_32_pixels_through_its_stem():
    model = cifar_resnet18()
    assert model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1)
    assert isinstance(model.maxpool, nn.Identity)
    assert model(torch.rand(2, 3, 32, 32)).shape == (2, 10)
    assert model.conv1(torch.rand(1, 3, 32, 32)).shape[-1] == 32


def test_small_models_take_any_size():
    assert SmallConvNet()(torch.rand(2, 3, 40, 24)).shape == (2, 10)
    assert PatchDiscriminator(8)(torch.rand(2, 3, 64, 64)).shape == (2, 1, 8, 8)
    with pytest.raises(ValueError, match="scale must be 2, 3 or 4"):
        SmallEDSR(5)


def test_build_model_is_the_one_home_of_the_choice():
    from helpers.models import MODELS, SmallConvNet, SmallEDSR, build_model, describe_model

    resnet = build_model("resnet18")
    assert resnet.conv1.stride == (1, 1) and isinstance(resnet.maxpool, nn.Identity)  # the CIFAR stem
    small = build_model("small")
    assert isinstance(small, SmallConvNet) and small.features[0].out_channels == 16  # the CPU stand-in's width
    edsr = build_model("small_edsr", scale=2, features=8, blocks=1)
    assert isinstance(edsr, SmallEDSR) and len(edsr.body) == 2 and edsr.scale == 2
    assert build_model("small", width=8).features[0].out_channels == 8
    assert describe_model("small_edsr", features=8, blocks=1) == "SmallEDSR (features 8, blocks 1)"
    with pytest.raises(ValueError, match="unknown model 'vgg'.*resnet18"):
        build_model("vgg")
    assert set(MODELS) >= {"espcn", "small_edsr", "resnet18", "small"}


def test_the_imagenet_resnet18_keeps_torchvisions_stem():
    from torchvision.models import resnet18

    from helpers.models import build_model, describe_model

    model = build_model("resnet18_imagenet", num_classes=10)
    assert model.conv1.stride == (2, 2) and isinstance(model.maxpool, nn.MaxPool2d) and model.fc.out_features == 10
    reference = resnet18(num_classes=10)
    assert [p.shape for p in model.parameters()] == [p.shape for p in reference.parameters()]
    assert describe_model("resnet18_imagenet") == "ResNet18 (torchvision, ImageNet stem)"
