"""The CIFAR ladder: the on-device rung's augmentation, a ceiling that feeds what the rung it bounds feeds, and the
post's 224-px batch timed with the rung's threads."""

from __future__ import annotations

import torch


def _cifar_rungs(images, labels, folder, **kw):
    """A tiny CIFAR ladder on the CPU (batch 4, an identity model), its rungs by role."""
    from torch import nn

    from helpers.course.ladder_cifar import cifar_ladder

    built = cifar_ladder(
        images,
        labels,
        image_folder=folder,
        device=torch.device("cpu"),
        batch_size=4,
        seed_batch=2,
        model=lambda: nn.Identity(),
        **kw,
    )
    return {r.role: r for r in built}


def test_the_cifar_ladders_device_rung_uses_the_augmentation_it_is_given(tmp_path):
    import kornia.augmentation as K
    from torch import nn

    from helpers.augment import cifar_train_augment

    images, labels = torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8), torch.arange(8) % 10

    def rungs(**kw):
        return _cifar_rungs(images, labels, tmp_path, **kw)

    default = rungs()["device"].build().augment
    assert type(default) is type(cifar_train_augment()) and "crop, flip" in rungs()["device"].name

    def rotated():  # 04's Try it 1: a rotation on the floats, before Normalize
        base = cifar_train_augment()
        return nn.Sequential(*base[:-1], K.RandomRotation(15.0), base[-1])

    mine = rungs(augment=rotated)
    loader = mine["device"].build()
    assert any(isinstance(m, K.RandomRotation) for m in loader.augment) and "your kornia" in mine["device"].name
    assert next(iter(loader))[0].shape == (4, 3, 32, 32)
    ceiling = mine["ceiling"].build().augment  # the ceiling: the rotated rung's Normalize, no random work
    assert not any(isinstance(m, (K.RandomRotation, K.ColorJitter)) for m in ceiling.modules())


def test_the_cifar_ceiling_feeds_the_same_dtype_layout_and_normalisation_as_the_rung_it_bounds(tmp_path):
    # the ceiling once yielded uint8 NCHW, so its step converted and changed layout itself and ran slower than the
    # augmented rung it bounds: a ceiling does the bounded rung's final conversion, with no random work
    from torch import nn

    from helpers.augment import CIFAR10_MEAN, CIFAR10_STD, NormalizeToFloat

    image = torch.randint(0, 256, (1, 3, 32, 32), dtype=torch.uint8)
    images, labels = image.repeat(8, 1, 1, 1), torch.arange(8) % 10  # every sample the same: batches are known

    def batches(**kw):
        rungs = _cifar_rungs(images, labels, tmp_path, **kw)
        assert rungs["ceiling"].bounds == "device"
        return next(iter(rungs["device"].build()))[0], next(iter(rungs["ceiling"].build()))[0]

    augmented, ceiling = batches()
    assert ceiling.dtype == augmented.dtype == torch.float32
    assert ceiling.is_contiguous(memory_format=torch.channels_last)
    assert augmented.is_contiguous(memory_format=torch.channels_last)
    mean, std = torch.tensor(CIFAR10_MEAN).view(1, 3, 1, 1), torch.tensor(CIFAR10_STD).view(1, 3, 1, 1)
    torch.testing.assert_close(ceiling, ((image / 255 - mean) / std).expand(4, -1, -1, -1))
    mine = NormalizeToFloat((0.5, 0.5, 0.5), (0.25, 0.25, 0.25), channels_last=False)  # an augmentation's own
    augmented, ceiling = batches(augment=lambda: nn.Sequential(mine))
    torch.testing.assert_close(ceiling, augmented)
    assert ceiling.is_contiguous() and not ceiling.is_contiguous(memory_format=torch.channels_last)


def test_the_posts_batch_is_timed_with_the_rungs_threads_and_says_its_predicted_step():
    # 04's note said "steps of about 1 s" (the target) and timed the step with other threads than the rung's
    from torch import nn

    from helpers.course.ladder_cifar import seed_post_batch

    threads_seen, before = [], torch.get_num_threads()

    class Recorder(nn.Module):
        def forward(self, x):
            threads_seen.append(torch.get_num_threads())
            return x

    def model():
        return nn.Sequential(Recorder(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 10))

    batch, why = seed_post_batch(model, device=torch.device("cpu"), wanted=4, step_s=10.0, threads=1)
    assert batch == 4 and "predicted step" in why and "with the rung's 1 intra-op thread" in why
    assert threads_seen[-3:] == [1, 1, 1] and torch.get_num_threads() == before  # warm-up, probe, check; restored


def test_the_post_batch_is_timed_in_the_precision_the_lesson_trains_in():
    # reader 3, 06: the batch was sized on an fp32 step while the comparison trained in bf16 (0.89 s against 0.49 s)
    from torch import nn

    from helpers.course.ladder_cifar import seed_post_batch

    dtypes: list[torch.dtype] = []

    class Recorder(nn.Module):
        def forward(self, x):
            dtypes.append(torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else x.dtype)
            return x

    def model():
        return nn.Sequential(Recorder(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 10))

    seed_post_batch(model, device=torch.device("cpu"), wanted=2, step_s=10.0, precision="bf16")
    assert dtypes and set(dtypes) == {torch.bfloat16}
    dtypes.clear()
    seed_post_batch(model, device=torch.device("cpu"), wanted=2, step_s=10.0)
    assert set(dtypes) == {torch.float32}
