"""Classification augmentation on the device: per-sample draws, reproducible under a seed, batched random crops."""

from __future__ import annotations

import kornia.augmentation as K
import pytest
import torch
from torchvision.transforms import functional as F

from helpers.augment import (
    CIFAR10_MEAN,
    CIFAR10_STD,
    TORCHVISION_RECIPE_STD,
    BatchHorizontalFlip,
    BatchRandomCrop,
    NormalizeToFloat,
    ToUnitFloat,
    cifar_train_augment,
    denormalize,
    normalize_only,
    torchvision_cifar_augment,
)


def _batch(n: int = 64) -> torch.Tensor:
    one = torch.arange(3 * 32 * 32, dtype=torch.int64).reshape(1, 3, 32, 32) % 251
    return one.repeat(n, 1, 1, 1).to(torch.uint8)  # the same image n times


def test_classification_augment_is_per_sample_and_repeats_under_a_seed():
    augment = cifar_train_augment()
    torch.manual_seed(0)
    first = augment(_batch())
    distinct = {tuple(image.flatten()[:200].round(decimals=4).tolist()) for image in first}
    assert len(distinct) > 32  # one image in, many different augmentations out
    torch.manual_seed(0)
    assert torch.equal(first, augment(_batch()))
    assert first.dtype == torch.float32 and first.shape == (64, 3, 32, 32)


def test_normalize_only_is_deterministic():
    out = normalize_only(CIFAR10_MEAN, CIFAR10_STD)(_batch(2))
    assert torch.equal(out[0], out[1]) and abs(float(out.mean())) < 3


def test_batch_random_crop_cuts_windows_of_the_padded_image_per_sample():
    torch.manual_seed(0)
    image = torch.arange(3 * 32 * 32, dtype=torch.float32).view(1, 3, 32, 32)
    out = BatchRandomCrop(32, padding=4)(image.repeat(100, 1, 1, 1))
    padded = torch.nn.functional.pad(image, [4] * 4, mode="reflect")[0]
    windows = {(y, x): padded[:, y : y + 32, x : x + 32] for y in range(9) for x in range(9)}
    offsets = [next(k for k, w in windows.items() if torch.equal(crop, w)) for crop in out]
    assert len(set(offsets)) > 30  # 81 possible offsets, drawn per sample


def _torchvision_recipe_outputs(image: torch.Tensor) -> list[torch.Tensor]:
    """Every output torchvision's RandomCrop(32, padding=4) + RandomHorizontalFlip + ToTensor + Normalize (the
    pytorch-cifar recipe) can give for one uint8 image: 81 offsets x 2 flips."""
    padded = F.pad(image, [4], fill=0, padding_mode="constant")
    outputs = []
    for y in range(9):
        for x in range(9):
            crop = padded[:, y : y + 32, x : x + 32]
            for flipped in (crop, crop.flip(-1)):
                outputs.append(F.normalize(flipped.float() / 255, CIFAR10_MEAN, TORCHVISION_RECIPE_STD))
    return outputs


def test_torchvision_preset_gives_what_the_torchvision_recipe_gives_per_sample():
    torch.manual_seed(0)
    image = torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8)
    out = torchvision_cifar_augment()(image.unsqueeze(0).repeat(200, 1, 1, 1))
    candidates = torch.stack(_torchvision_recipe_outputs(image))
    matches = [int((candidates - sample).abs().flatten(1).amax(1).argmin()) for sample in out]
    errors = [float((candidates[m] - s).abs().max()) for m, s in zip(matches, out)]
    assert max(errors) < 1e-5  # every sample is one of torchvision's outputs, up to float rounding
    assert len(set(matches)) > 60  # drawn per sample: many of the 162 offsets and flips
    flipped = sum(m % 2 for m in matches) / len(matches)
    assert 0.35 < flipped < 0.65
    assert out.is_contiguous(memory_format=torch.channels_last)


def test_crop_and_flip_on_uint8_equal_the_float_path():
    images = _batch(32)
    for mode in ("reflect", "constant"):
        crop = BatchRandomCrop(32, 4, mode)
        torch.manual_seed(1)
        on_uint8 = crop(images)
        torch.manual_seed(1)
        assert on_uint8.dtype == torch.uint8 and torch.equal(on_uint8.float(), crop(images.float()))
    padded = BatchRandomCrop(40, 4, "reflect")(images[:1])
    assert torch.equal(padded.float(), torch.nn.functional.pad(images[:1].float(), [4] * 4, mode="reflect"))
    torch.manual_seed(2)
    flipped = BatchHorizontalFlip()(images)
    assert all(torch.equal(f, i) or torch.equal(f, i.flip(-1)) for f, i in zip(flipped, images))
    assert 4 < sum(not torch.equal(f, i) for f, i in zip(flipped, images)) < 28
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    expected = (images.float() / 255 - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    assert torch.allclose(NormalizeToFloat(mean, std)(images), expected, atol=1e-5)


def test_the_crop_gather_flips_per_sample_when_asked():
    image = _batch(1)
    torch.manual_seed(3)
    out = BatchRandomCrop(32, 4, "constant", flip_p=0.5)(image.repeat(200, 1, 1, 1))
    padded = F.pad(image[0], [4], fill=0)
    windows = [padded[:, y : y + 32, x : x + 32] for y in range(9) for x in range(9)]
    flipped = [
        next(flip for w in windows for flip in (False, True) if torch.equal(crop, w.flip(-1) if flip else w))
        for crop in out
    ]
    assert 0.35 < sum(flipped) / len(flipped) < 0.65


def _same_images(batch: int = 400, size: int = 6) -> torch.Tensor:
    one = torch.arange(3 * size * size, dtype=torch.float32).view(3, size, size)
    return one.expand(batch, -1, -1, -1).contiguous()


def _flipped_share(op: torch.nn.Module, images: torch.Tensor) -> float:
    out = op(images)
    flipped = torch.tensor([torch.equal(o, images[0].flip(-1)) for o in out])
    kept = torch.tensor([torch.equal(o, images[0]) for o in out])
    assert bool((flipped | kept).all())
    return float(flipped.float().mean())


class TestFlipShare:
    """The crop's and the flip's share of flipped samples is the probability asked for (at every p, not only at 0.5
    where a reversed comparison gives the same share)."""

    @pytest.mark.parametrize(("p", "low", "high"), [(1.0, 1.0, 1.0), (0.2, 0.12, 0.28), (0.0, 0.0, 0.0)])
    def test_the_crop_flips_the_share_of_samples_it_is_asked_to(self, p, low, high):
        torch.manual_seed(0)
        assert low <= _flipped_share(BatchRandomCrop(6, padding=0, flip_p=p), _same_images()) <= high

    @pytest.mark.parametrize(("p", "low", "high"), [(1.0, 1.0, 1.0), (0.2, 0.12, 0.28)])
    def test_the_flip_flips_the_share_of_samples_it_is_asked_to(self, p, low, high):
        torch.manual_seed(0)
        assert low <= _flipped_share(BatchHorizontalFlip(p), _same_images()) <= high


def _ops(augment: torch.nn.Module) -> dict[type, torch.nn.Module]:
    ops = {type(m): m for m in augment}
    assert len(ops) == len(list(augment)), "one op of each kind"
    return ops


class TestCifarPreset:
    """The CIFAR training preset is what its docstring says: on uint8, a 32-px crop after 4-px reflect padding with the
    flip in the same copy, then float, ColorJitter (brightness, contrast, saturation; no hue) with a probability,
    grayscale, and one Normalize to float; each argument reaches its op, and an image comes out normalised."""

    def test_the_preset_holds_every_op_in_order_with_the_standard_cifar_crop(self):
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

    def test_each_argument_reaches_its_op(self):
        mean, std = (0.1, 0.2, 0.3), (0.4, 0.5, 0.6)
        ops = _ops(
            cifar_train_augment(mean=mean, std=std, padding=3, jitter=0.1, jitter_p=0.5, grayscale_p=0.3, size=24)
        )
        assert (ops[BatchRandomCrop].size, ops[BatchRandomCrop].padding) == (24, 3)
        jitter = ops[K.ColorJitter]
        assert (jitter.brightness, jitter.contrast, jitter.saturation, jitter.hue, jitter.p) == (
            0.1,
            0.1,
            0.1,
            0.0,
            0.5,
        )
        assert ops[K.RandomGrayscale].p == 0.3
        normalize = ops[NormalizeToFloat]
        std_t, mean_t = torch.tensor(std).view(1, 3, 1, 1), torch.tensor(mean).view(1, 3, 1, 1)
        torch.testing.assert_close(normalize.scale, 1 / std_t)
        torch.testing.assert_close(normalize.shift, -mean_t / std_t)

    def test_an_image_comes_out_cropped_and_normalised(self):
        torch.manual_seed(0)
        grey = torch.full((64, 3, 40, 40), 128, dtype=torch.uint8)  # a flat image: no op but Normalize changes it
        out = cifar_train_augment(jitter_p=0.0, grayscale_p=0.0)(grey)
        expected = (128 / 255 - torch.tensor(CIFAR10_MEAN)) / torch.tensor(CIFAR10_STD)
        assert out.shape == (64, 3, 32, 32)
        torch.testing.assert_close(out, expected.view(1, 3, 1, 1).expand_as(out))


def _images() -> torch.Tensor:
    return torch.randint(0, 256, (4, 3, 6, 5), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))


class TestNormalisation:
    """Normalisation on the device and its inverse for display: normalize_only is (x / 255 - mean) / std per channel,
    and denormalize undoes it (clamped to [0, 1]) for a batch and for a single image."""

    def test_normalize_only_is_the_per_channel_formula(self):
        images = _images()
        mean, std = torch.tensor(CIFAR10_MEAN).view(1, 3, 1, 1), torch.tensor(CIFAR10_STD).view(1, 3, 1, 1)
        torch.testing.assert_close(normalize_only(CIFAR10_MEAN, CIFAR10_STD)(images), (images / 255 - mean) / std)
        mine = normalize_only(mean=(0.5, 0.25, 0.0), std=(0.5, 0.25, 1.0))(images)
        torch.testing.assert_close(mine[:, 2], images[:, 2] / 255)
        torch.testing.assert_close(mine[:, 0], (images[:, 0] / 255 - 0.5) / 0.5)

    def test_denormalize_undoes_normalize_for_batches_and_single_images(self):
        images = _images()
        unit = images / 255
        normalized = normalize_only(CIFAR10_MEAN, CIFAR10_STD)(images)
        torch.testing.assert_close(denormalize(normalized, mean=CIFAR10_MEAN, std=CIFAR10_STD), unit)
        torch.testing.assert_close(
            denormalize(normalized[1], mean=CIFAR10_MEAN, std=CIFAR10_STD), unit[1]
        )  # (C, H, W): one image
        own = normalize_only(mean=(0.1, 0.2, 0.3), std=(0.2, 0.3, 0.4))(images)
        torch.testing.assert_close(denormalize(own, mean=(0.1, 0.2, 0.3), std=(0.2, 0.3, 0.4)), unit)

    def test_denormalize_clamps_to_the_displayable_range(self):
        out = denormalize(
            torch.tensor([[-10.0, 10.0]]).view(1, 1, 1, 2).expand(1, 3, 1, 2), mean=CIFAR10_MEAN, std=CIFAR10_STD
        )
        assert torch.equal(out, torch.tensor([0.0, 1.0]).view(1, 1, 1, 2).expand(1, 3, 1, 2))

    def test_normalize_only_hands_evaluation_the_training_augmentations_dtype_and_layout(self):
        # evaluation preprocessing once returned NCHW floats while training batches were channels_last: the model then
        # changed layout at every evaluation batch
        from helpers.augment import cifar_train_augment

        images = _images()
        evaluated, trained = (
            normalize_only(CIFAR10_MEAN, CIFAR10_STD)(images),
            cifar_train_augment(size=4, padding=0)(images[..., :4, :4]),
        )
        assert evaluated.dtype == trained.dtype == torch.float32
        assert evaluated.is_contiguous(memory_format=torch.channels_last)
        assert trained.is_contiguous(memory_format=torch.channels_last)
        assert normalize_only(CIFAR10_MEAN, CIFAR10_STD, channels_last=False)(images).is_contiguous()
