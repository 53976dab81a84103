"""The SR networks' forward passes against hand-written references from their own layers: ESPCN's tanh activations,
SmallEDSR's scaled residuals and its long skip."""

from __future__ import annotations

import torch

from helpers.models import ESPCN, SmallEDSR
from helpers.resize import upscale


def test_espcn_is_conv_tanh_conv_tanh_conv_pixel_shuffle():
    torch.manual_seed(0)
    model, lr = ESPCN(2, features=(8, 4)), torch.rand(1, 3, 6, 6)
    first, second, third = (m for m in model.body if isinstance(m, torch.nn.Conv2d))
    expected = torch.nn.functional.pixel_shuffle(third(torch.tanh(second(torch.tanh(first(lr))))), 2)
    torch.testing.assert_close(model(lr), expected)


def test_small_edsr_scales_each_residual_and_keeps_the_long_skip():
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
