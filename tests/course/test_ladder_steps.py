"""The benchmark steps hand the model one layout, whichever layout a rung sends."""

from __future__ import annotations

import torch


def test_the_benchmark_steps_hand_the_model_one_layout_whichever_a_rung_sends():
    # 02's ladder: the decoded cache's RGBX crops arrive channels-last-strided, the lazy crops NCHW; the same ESPCN
    # then ran at another speed per rung, and the pre-made baselines of one model differed up to 9x
    from torch import nn

    from helpers.course.ladder_steps import classification_train_step, sr_train_step

    seen = []

    class Recorder(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(1))

        def forward(self, x):
            seen.append((x.dtype, x.is_contiguous(), x.is_contiguous(memory_format=torch.channels_last)))
            return x * self.weight

    rgbx = torch.randint(0, 256, (2, 8, 8, 4), dtype=torch.uint8)[..., :3].permute(0, 3, 1, 2)  # the cache's crops
    nchw = torch.rand(2, 3, 8, 8)
    step = sr_train_step(Recorder())
    step((rgbx, rgbx)), step((nchw, nchw))
    assert seen == [(torch.float32, True, False)] * 2
    seen.clear()
    step = classification_train_step(nn.Sequential(Recorder(), nn.Flatten(), nn.LazyLinear(10)))
    step((nchw, torch.tensor([0, 1]))), step((nchw.contiguous(memory_format=torch.channels_last), torch.tensor([2, 3])))
    assert seen == [(torch.float32, False, True)] * 2
