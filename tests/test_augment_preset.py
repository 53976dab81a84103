"""The CIFAR training preset is what its docstring says: on uint8, a 32-px crop after 4-px reflect padding with the
flip in the same copy, then float, ColorJitter (brightness, contrast, saturation; no hue) with a probability,
grayscale, and one Normalize to float; each argument reaches its op, and an image comes out normalised."""

from __future__ import annotations

import kornia.augmentation as K
import torch

from helpers.augment import (
    CIFAR10_MEAN,
    CIFAR10_STD,
    BatchRandomCrop,
    NormalizeToFloat,
    ToUnitFloat,
    cifar_train_augment,
)


def _ops(augment: torch.nn.Module) -> dict[type, torch.nn.Module]:
    ops = {type(m): m for m in augment}
    assert len(ops) == len(list(augment)), "one op of each kind"
    return ops


def test_the_preset_holds_every_op_in_order_with_the_standard_cifar_crop():
    augment = cifar_train_augment()
    kinds = [type(m) for m in augment]
    wanted = [BatchRandomCrop, ToUnitFloat, K.ColorJitter, K.RandomGrayscale, NormalizeToFloat]
    assert kinds == wanted  # crop and flip on uint8 first: the float conversion happens on the cropped batch
    crop = _ops(augment)[BatchRandomCrop]
    assert (crop.size, crop.padding, crop.padding_mode, crop.flip_p) == (32, 4, "reflect", 0.5)
    jitter, grey = _ops(augment)[K.ColorJitter], _ops(augment)[K.RandomGrayscale]
    # the signature's defaults: mild colour jitter most of the time, grayscale now and then
    assert (jitter.brightness, jitter.contrast, jitter.saturation, jitter.hue) == (0.2, 0.2, 0.2, 0.0)
    assert (jitter.p, grey.p) == (0.8, 0.2)


def test_each_argument_reaches_its_op():
    mean, std = (0.1, 0.2, 0.3), (0.4, 0.5, 0.6)
    ops = _ops(cifar_train_augment(mean=mean, std=std, padding=3, jitter=0.1, jitter_p=0.5, grayscale_p=0.3, size=24))
    assert (ops[BatchRandomCrop].size, ops[BatchRandomCrop].padding) == (24, 3)
    jitter = ops[K.ColorJitter]
    assert (jitter.brightness, jitter.contrast, jitter.saturation, jitter.hue, jitter.p) == (0.1, 0.1, 0.1, 0.0, 0.5)
    assert ops[K.RandomGrayscale].p == 0.3
    normalize = ops[NormalizeToFloat]
    std_t, mean_t = torch.tensor(std).view(1, 3, 1, 1), torch.tensor(mean).view(1, 3, 1, 1)
    torch.testing.assert_close(normalize.scale, 1 / std_t)
    torch.testing.assert_close(normalize.shift, -mean_t / std_t)


def test_an_image_comes_out_cropped_and_normalised():
    torch.manual_seed(0)
    grey = torch.full((64, 3, 40, 40), 128, dtype=torch.uint8)  # a flat image: no op but Normalize changes it
    out = cifar_train_augment(jitter_p=0.0, grayscale_p=0.0)(grey)
    expected = (128 / 255 - torch.tensor(CIFAR10_MEAN)) / torch.tensor(CIFAR10_STD)
    assert out.shape == (64, 3, 32, 32)
    torch.testing.assert_close(out, expected.view(1, 3, 1, 1).expand_as(out))
