"""evaluate_sr and evaluate_classifier against independent references: every reported number recomputed from the
metrics directly (the model's output clamped, SSIM of the bicubic baseline its own), the model's mode restored, and
the classifier's accuracy over every image (a short last batch too), preprocessed, under autocast, per rank share."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import helpers.evaluation as evaluation_module
from helpers.distributed import DistributedContext
from helpers.evaluation import evaluate_classifier, evaluate_sr
from helpers.metrics import psnr_y, ssim_y
from helpers.resize import upscale


class _Overshooting(nn.Module):
    """A stand-in SR model whose output leaves [0, 1] (the evaluation must clamp it as a saved image would be)."""

    def forward(self, lr: torch.Tensor) -> torch.Tensor:
        return F.interpolate(lr, scale_factor=2, mode="nearest") * 1.6 - 0.3


def _pairs(count: int = 3) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [
        (torch.rand(3, 14, 14, generator=generator), torch.rand(3, 28, 28, generator=generator)) for _ in range(count)
    ]


def test_evaluate_sr_reports_what_the_metrics_give_directly():
    model, pairs = _Overshooting().train(), _pairs()
    result = evaluate_sr(model, pairs, scale=2, device="cpu")
    assert model.training  # put back in the mode it came in
    rows = []
    for lr, hr in pairs:
        sr, bicubic = model(lr[None]).clamp(0, 1), upscale(lr[None], 2).clamp(0, 1)
        rows.append([float(f(x, hr[None], 2)) for x in (sr, bicubic) for f in (psnr_y, ssim_y)])
    means = [sum(column) / len(rows) for column in zip(*rows)]
    assert result["psnr_y"] == pytest.approx(means[0], abs=1e-9)
    assert result["ssim_y"] == pytest.approx(means[1], abs=1e-9)
    assert result["bicubic_psnr_y"] == pytest.approx(means[2], abs=1e-9)
    assert result["bicubic_ssim_y"] == pytest.approx(means[3], abs=1e-9)
    assert result["psnr_gain_db"] == pytest.approx(means[0] - means[2], abs=1e-9)
    assert result["per_image_psnr_y"] == pytest.approx([r[0] for r in rows], abs=1e-9)


class _Scorer(nn.Module):
    """Logits that say which class a preprocessed image's mean falls in, recording whether autocast was on."""

    def __init__(self) -> None:
        super().__init__()
        self.linear, self.autocast = nn.Linear(1, 4), []
        with torch.no_grad():
            self.linear.weight.copy_(torch.tensor([[0.0], [2.0], [4.0], [6.0]]))  # -(mean - k)^2 + mean^2
            self.linear.bias.copy_(torch.tensor([0.0, -1.0, -4.0, -9.0]))

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        self.autocast.append(torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu"))
        return self.linear(batch.mean(dim=(1, 2, 3))[:, None])


def _classified(count: int = 13):
    generator = torch.Generator().manual_seed(0)
    levels = torch.randint(0, 4, (count,), generator=generator)
    images = (levels * 60 + 20).to(torch.uint8).view(-1, 1, 1, 1).expand(-1, 3, 4, 4).contiguous()
    return images, levels


class _ToLevel(nn.Module):
    """uint8 (level * 60 + 20) -> the level as a float: the model classifies right only after this preprocess."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return (images.float() - 20) / 60


def test_evaluate_classifier_counts_every_image_preprocessed_under_its_precision():
    images, labels = _classified(13)
    wrong = labels.clone()
    wrong[-1] = (wrong[-1] + 1) % 4  # only the last image (in a short last batch) is labelled wrongly
    model = _Scorer()
    result = evaluate_classifier(model, images, wrong, preprocess=_ToLevel(), device="cpu", batch_size=5)
    assert result["top1"] == pytest.approx(12 / 13)
    assert model.autocast == [False] * 3  # 13 images in batches of 5
    model.autocast.clear()
    evaluate_classifier(model, images, labels, preprocess=_ToLevel(), device="cpu", precision="bf16", batch_size=20)
    assert model.autocast == [torch.bfloat16]


def test_each_rank_scores_its_own_share_against_its_own_labels(monkeypatch):
    monkeypatch.setattr(evaluation_module, "all_reduce_sum", lambda values, context: list(values))  # one rank's
    images, labels = _classified(12)
    wrong = labels.clone()
    wrong[6:] = (wrong[6:] + 1) % 4  # rank 1's half is labelled wrongly, rank 0's right
    scores = [
        evaluate_classifier(
            _Scorer(), images, wrong, preprocess=_ToLevel(), device="cpu", context=DistributedContext(rank, 2)
        )["top1"]
        for rank in (0, 1)
    ]
    assert scores == [1.0, 0.0]
