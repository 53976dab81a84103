"""Independence of every random draw: each augmentation op varies per sample on identical inputs (its own statistic,
not the pipeline's), the SR crop loaders draw each sample's origin and transform apart and reach every legal
scale-aligned origin (the last one too, no illegal one), and torch, NumPy and Python `random` streams differ per
DataLoader worker and per rank while one seed reproduces them all."""

from __future__ import annotations

import random

import kornia.augmentation as K
import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import Dataset

from helpers.augment import BatchRandomCrop, cifar_train_augment
from helpers.loading import loader_generator, make_loader
from helpers.seeding import rank_seed, seed_everything
from helpers.sr_cache import CachedCropLoader, DecodedSRCache, DeviceSRCropLoader
from helpers.sr_data import LazyCropSRDataset, PairedSRAugment, dihedral

BATCH = 256


def _op(kind: type) -> torch.nn.Module:
    """The one op of `kind` in the CIFAR training pipeline, tested on its own."""
    torch.manual_seed(0)
    found = [m for m in cifar_train_augment() if isinstance(m, kind)]
    assert len(found) == 1, f"cifar_train_augment() should hold one {kind.__name__}, found {len(found)}"
    return found[0]


def _same_images(batch: int = BATCH, size: int = 8) -> torch.Tensor:
    """`batch` copies of one image whose pixels are all different (float in [0, 1])."""
    one = torch.arange(3 * size * size, dtype=torch.float32).view(3, size, size) / (3 * size * size)
    return one.expand(batch, -1, -1, -1).contiguous()


# --- each op of cifar_train_augment on its own -------------------------------------------------------------------


def _crop_offsets(crop: BatchRandomCrop, images: torch.Tensor) -> list[tuple[int, int]]:
    """The (y, x) offset in the padded image that each output crop was cut at; fails on a crop cut anywhere else."""
    padded = torch.nn.functional.pad(images[:1], [crop.padding] * 4, mode="reflect")[0]
    out = crop(images)
    size, span = crop.size, padded.shape[-1] - crop.size + 1
    candidates = {(y, x): padded[:, y : y + size, x : x + size] for y in range(span) for x in range(span)}
    offsets = []
    for sample in out:
        match = [key for key, window in candidates.items() if torch.equal(window, sample)]
        assert len(match) == 1, "a crop matches no legal window of the padded image"
        offsets.append(match[0])
    return offsets


def test_random_crop_draws_each_sample_its_own_offset_and_reaches_every_one():
    torch.manual_seed(0)
    crop, images = BatchRandomCrop(8, padding=2), _same_images()
    first = _crop_offsets(crop, images)
    assert len(set(first)) > 15  # 25 offsets, 256 samples: one draw per batch would give a single one
    seen = set(first)
    for _ in range(3):
        seen |= set(_crop_offsets(crop, images))
    assert seen == {(y, x) for y in range(5) for x in range(5)}  # 0..2*padding each way, the last included


def test_horizontal_flip_flips_about_half_of_identical_samples():
    """The preset flips inside its crop's one copy: with the crop's offsets fixed (no padding), each sample is the
    image or its mirror, about half of each, drawn per sample."""
    crop = _op(BatchRandomCrop)
    assert crop.flip_p == 0.5
    images = _same_images(size=8)
    out = BatchRandomCrop(8, padding=0, flip_p=crop.flip_p)(images)
    flipped = torch.tensor([torch.equal(o, images[0].flip(-1)) for o in out])
    kept = torch.tensor([torch.equal(o, images[0]) for o in out])
    assert bool((flipped | kept).all())
    assert 0.35 < flipped.float().mean() < 0.65


def test_color_jitter_draws_each_sample_its_own_colour_and_skips_some():
    jitter, images = _op(K.ColorJitter), _same_images()
    out = jitter(images)
    means = out.mean(dim=(1, 2, 3))
    unchanged = torch.tensor([torch.allclose(o, images[0]) for o in out])
    assert 0.08 < unchanged.float().mean() < 0.35  # applied with probability jitter_p = 0.8
    assert len(torch.unique(means[~unchanged].round(decimals=4))) > 0.9 * int((~unchanged).sum())


def test_random_grayscale_greys_about_a_fifth_of_identical_samples():
    grey, images = _op(K.RandomGrayscale), _same_images()
    out = grey(images)
    greyed = torch.tensor([torch.allclose(o[0], o[1]) and torch.allclose(o[1], o[2]) for o in out])
    assert 0.08 < greyed.float().mean() < 0.35  # p = 0.2; a draw per batch greys all or none


# --- the paired SR augmentation ----------------------------------------------------------------------------------


def _applied_choice(original: torch.Tensor, out: torch.Tensor) -> int:
    """Which of the 8 flips/rotations turned `original` into `out`."""
    found = [c for c in range(8) if torch.equal(dihedral(original, c), out)]
    assert len(found) == 1, "the output is none of the 8 flips/rotations of its input"
    return found[0]


def test_paired_augment_gives_each_pair_its_own_transform_the_same_on_lr_and_hr():
    torch.manual_seed(0)
    lr, hr = _same_images(size=4), _same_images(size=8)
    out_lr, out_hr = PairedSRAugment()(lr, hr)
    lr_choices = [_applied_choice(lr[0], o) for o in out_lr]
    assert lr_choices == [_applied_choice(hr[0], o) for o in out_hr]
    counts = np.bincount(lr_choices, minlength=8)
    assert counts.min() > 10  # all 8 transforms, each about 32 times in 256 pairs


def test_paired_augment_jitters_each_pair_apart_and_both_images_of_a_pair_alike():
    torch.manual_seed(0)
    lr = torch.full((BATCH, 3, 4, 4), 0.5)
    lr[:, 0] = 0.3
    hr = torch.nn.functional.interpolate(lr, scale_factor=2)  # the same colours, twice the size
    out_lr, out_hr = PairedSRAugment(jitter=0.3, jitter_p=0.5)(lr, hr)
    lr_means, hr_means = out_lr.mean(dim=(2, 3)), out_hr.mean(dim=(2, 3))
    assert torch.allclose(lr_means, hr_means, atol=1e-5)  # one draw per pair, applied to both
    changed = ~torch.isclose(lr_means, lr[:, :, 0, 0], atol=1e-6).all(dim=1)
    assert 0.35 < changed.float().mean() < 0.65  # jitter_p = 0.5, per pair
    assert len(torch.unique(lr_means[changed, 0].round(decimals=5))) > 0.9 * int(changed.sum())


# --- the SR crop loaders' draws ----------------------------------------------------------------------------------

SCALE, CROP = 4, 8
SIZES = [(23, 30), (34, 21)]  # (width, height): neither a multiple of the scale


@pytest.fixture(scope="module")
def position_cache(tmp_path_factory) -> DecodedSRCache:
    """Images whose every pixel says where it is: R = x, G = y, B = image number."""
    folder = tmp_path_factory.mktemp("positions")
    for index, (width, height) in enumerate(SIZES):
        ys, xs = np.mgrid[:height, :width]
        pixels = np.stack([xs, ys, np.full_like(xs, 10 * index)], axis=-1).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"img{index}.png")
    return DecodedSRCache(folder, scale=SCALE)


def _legal_origins() -> set[tuple[int, int, int]]:
    """Every (image, y, x) a crop may start at: scale-aligned, inside the mod-cropped image."""
    legal = set()
    for index, (width, height) in enumerate(SIZES):
        width, height = width - width % SCALE, height - height % SCALE
        legal |= {(index, y, x) for y in range(0, height - CROP + 1, SCALE) for x in range(0, width - CROP + 1, SCALE)}
    return legal


def _origin_and_choice(hr: torch.Tensor) -> tuple[tuple[int, int, int], int]:
    """Read a uint8 HR crop of a position image back into (image, y, x) and the flip/rotation applied to it."""
    for undo in range(8):
        crop = dihedral(hr, undo)
        x, y, image = (int(v) for v in crop[:, 0, 0])
        ramp = torch.arange(CROP)
        if torch.equal(crop[0], (x + ramp).expand(CROP, -1).to(crop.dtype)) and torch.equal(
            crop[1], (y + ramp)[:, None].expand(-1, CROP).to(crop.dtype)
        ):
            return (image // 10, y, x), undo
    raise AssertionError("the crop is not a flipped/rotated window of any image")


def _loader_batches(kind: str, cache: DecodedSRCache, *, augment: bool, batches: int):
    common = dict(batch_size=64, hr_crop=CROP, batches_per_epoch=batches, seed=0, augment=augment)
    if kind == "cached":
        loader = CachedCropLoader(cache, as_float=False, **common)
        return [hr for _, hr in loader]
    loader = DeviceSRCropLoader(cache, **common)
    return [(hr * 255).round().to(torch.uint8) for _, hr in loader]


@pytest.mark.parametrize("kind", ["cached", "device"])
def test_crop_loaders_reach_every_legal_origin_and_no_other(kind, position_cache):
    legal = _legal_origins()
    batches = _loader_batches(kind, position_cache, augment=False, batches=40)
    origins = [_origin_and_choice(hr)[0] for batch in batches for hr in batch]
    assert set(origins) <= legal, f"illegal origins: {sorted(set(origins) - legal)[:5]}"
    assert set(origins) == legal, f"never reached: {sorted(legal - set(origins))}"
    first = {_origin_and_choice(hr)[0] for hr in batches[0]}
    assert len(first) > 20  # drawn per sample: one draw per batch would give one origin


def test_lazy_crops_reach_every_legal_origin_and_no_other(position_cache):
    dataset = LazyCropSRDataset(position_cache.paths, scale=SCALE, hr_crop=CROP, seed=0, augment=False)
    crops = [dataset[index % len(dataset)][1] for index in range(400)]
    origins = [_origin_and_choice((hr * 255).round().to(torch.uint8))[0] for hr in crops]
    legal = _legal_origins()
    assert set(origins) <= legal, f"illegal origins: {sorted(set(origins) - legal)[:5]}"
    assert set(origins) == legal, f"never reached: {sorted(legal - set(origins))}"


def test_lazy_crops_draw_all_eight_flips_and_rotations(position_cache):
    dataset = LazyCropSRDataset(position_cache.paths, scale=SCALE, hr_crop=CROP, seed=0, augment=True)
    pairs = [dataset[index % len(dataset)] for index in range(64)]
    undone = {_origin_and_choice((hr * 255).round().to(torch.uint8))[1] for _, hr in pairs}
    assert undone == set(range(8))


@pytest.mark.parametrize("kind", ["cached", "device"])
def test_crop_loaders_give_each_sample_its_own_flip_and_rotation(kind, position_cache):
    (batch,) = _loader_batches(kind, position_cache, augment=True, batches=1)
    undone = [_origin_and_choice(hr)[1] for hr in batch]
    assert len(set(undone)) == 8  # 64 samples, 8 transforms: a draw per batch would give one


# --- worker and rank streams -------------------------------------------------------------------------------------


class _Draws(Dataset):
    """Each item: the worker's draw from torch, NumPy and Python's `random`."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> tuple[float, float, float, int]:
        info = torch.utils.data.get_worker_info()
        return float(torch.rand(())), float(np.random.rand()), random.random(), info.id if info else -1


def _streams(seed: int, rank: int) -> dict[tuple[int, int], tuple[float, float, float]]:
    """The first draw of each worker of a 2-worker loader, keyed by (rank, worker)."""
    loader = make_loader(_Draws(), 1, seed=seed, rank=rank, shuffle=False, drop_last=False, num_workers=2)
    firsts: dict[tuple[int, int], tuple[float, float, float]] = {}
    for torch_draw, numpy_draw, python_draw, worker in loader:
        firsts.setdefault((rank, int(worker)), (float(torch_draw), float(numpy_draw), float(python_draw)))
    return firsts


def test_every_worker_and_rank_gets_its_own_torch_numpy_and_python_stream():
    streams = {**_streams(0, 0), **_streams(0, 1)}
    assert len(streams) == 4
    for position, library in enumerate(("torch", "numpy", "random")):
        values = [draws[position] for draws in streams.values()]
        assert len(set(values)) == 4, f"two workers or ranks share a {library} stream: {values}"
    assert _streams(0, 1) == _streams(0, 1)  # one seed reproduces every worker's stream
    assert _streams(1, 0) != _streams(0, 0)


def test_rank_seeds_give_each_rank_its_own_stream_in_every_library():
    draws = []
    for rank in range(4):
        generator = seed_everything(rank_seed(7, rank))
        own = float(torch.rand((), generator=generator))
        draws.append((float(torch.rand(())), float(np.random.rand()), random.random(), own))
        if torch.cuda.is_available():
            draws[-1] += (float(torch.rand((), device="cuda")),)
    for position in range(len(draws[0])):
        assert len({d[position] for d in draws}) == 4, f"ranks share stream {position}: {draws}"
    seed_everything(rank_seed(7, 2))
    assert (float(torch.rand(())), float(np.random.rand()), random.random()) == draws[2][:3]


def test_loader_generators_differ_per_rank_and_repeat_per_seed():
    firsts = [int(torch.randint(0, 2**62, (), generator=loader_generator(3, rank))) for rank in range(4)]
    assert len(set(firsts)) == 4
    assert int(torch.randint(0, 2**62, (), generator=loader_generator(3, 2))) == firsts[2]
