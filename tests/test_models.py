"""Model shapes, the bicubic skip, and the CIFAR stem."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.metrics import bicubic_upscale
from helpers.models import ESPCN, PatchDiscriminator, SmallConvNet, SmallEDSR, cifar_resnet18
from helpers.resize import upscale


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


class TestSrForwardPasses:
    """The SR networks' forward passes against hand-written references from their own layers: ESPCN's tanh activations,
    SmallEDSR's scaled residuals and its long skip."""

    def test_espcn_is_conv_tanh_conv_tanh_conv_pixel_shuffle(self):
        torch.manual_seed(0)
        model, lr = ESPCN(2, features=(8, 4)), torch.rand(1, 3, 6, 6)
        first, second, third = (m for m in model.body if isinstance(m, torch.nn.Conv2d))
        expected = torch.nn.functional.pixel_shuffle(third(torch.tanh(second(torch.tanh(first(lr))))), 2)
        torch.testing.assert_close(model(lr), expected)

    def test_small_edsr_scales_each_residual_and_keeps_the_long_skip(self):
        torch.manual_seed(0)
        model, lr = SmallEDSR(2, features=8, blocks=2, res_scale=0.1), torch.rand(1, 3, 6, 6)
        with torch.no_grad():
            head = model.head(lr)
            x = head
            for block in model.body[:-1]:
                x = x + 0.1 * block.body(x)
            features = head + model.body[-1](x)
            expected = model.tail(model.upsample(features)) + upscale(lr, 2)
            torch.testing.assert_close(model(lr), expected)
        assert len(model.body) == 3  # two residual blocks and the body's last convolution
