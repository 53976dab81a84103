"""Super-resolution datasets: LR/HR alignment on every rung, determinism, worker streams, errors, the disk cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.datasets import (
    CachedCropLoader,
    DecodedSRCache,
    InMemoryNaiveSRDataset,
    LazyCropSRDataset,
    NaiveSRDataset,
    SREvalDataset,
    bicubic_downscale,
)
from helpers.images import BadImageError, ImageTooSmallError
from helpers.loading import make_loader


@pytest.fixture(scope="module")
def photo_dir(tmp_path_factory):
    """Six smooth-but-detailed RGB JPEG-free PNGs of BSDS-like and odd sizes (odd sizes exercise the mod-crop)."""
    from skimage import data as skdata

    folder = tmp_path_factory.mktemp("photos")
    astronaut = skdata.astronaut()
    for i, (h, w) in enumerate([(321, 481), (481, 321), (250, 303), (300, 451), (257, 258), (321, 481)]):
        y, x = (i * 17) % (512 - h + 1), (i * 29) % (512 - w + 1)
        Image.fromarray(np.ascontiguousarray(astronaut[y : y + h, x : x + w])).save(folder / f"img{i}.png")
    return folder


def _interior_gap(lr: torch.Tensor, hr: torch.Tensor, scale: int, border: int = 2) -> float:
    """Max |bicubic_downscale(hr) - lr| away from the crop border (where the filter sees outside the crop)."""
    expected = bicubic_downscale(hr, scale)
    window = (..., slice(border, -border), slice(border, -border))
    return float((expected[window] - lr[window]).abs().max())


def _shifted_gap(lr: torch.Tensor, hr: torch.Tensor, scale: int) -> float:
    """The same gap with HR moved by one LR pixel: what misalignment would look like."""
    return _interior_gap(lr[..., 1:, 1:], hr[..., : -scale, : -scale], scale)


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_lazy_crop_pairs_align(photo_dir, scale):
    dataset = LazyCropSRDataset(photo_dir, scale=scale, hr_crop=16 * scale, seed=0)
    for index in range(len(dataset)):
        lr, hr = dataset[index]
        assert lr.shape == (3, dataset.hr_crop // scale, dataset.hr_crop // scale)
        assert hr.shape == (3, dataset.hr_crop, dataset.hr_crop)
        assert 0 <= float(lr.min()) and float(lr.max()) <= 1
        assert _interior_gap(lr, hr, scale) < 1e-5  # the LR is made from this very crop


def test_cache_pairs_align_within_uint8_rounding(photo_dir):
    cache = DecodedSRCache(photo_dir, scale=4)
    lr, hr = cache.sample(32, 64, torch.Generator().manual_seed(0))
    assert lr.dtype == torch.uint8 and lr.shape == (32, 3, 16, 16) and hr.shape == (32, 3, 64, 64)
    lr, hr = lr.float() / 255, hr.float() / 255
    assert _interior_gap(lr, hr, 4) <= 2.5 / 255  # LR rounded once, HR rounded once
    assert _shifted_gap(lr, hr, 4) > 10 / 255  # and a one-pixel shift would be plainly visible


def test_naive_rungs_align(photo_dir):
    for dataset in (NaiveSRDataset(photo_dir, scale=4, hr_crop=64, seed=0), InMemoryNaiveSRDataset(photo_dir, 4, 64, 0)):
        for index in range(len(dataset)):
            upscaled, hr = dataset[index]
            assert upscaled.shape == hr.shape == (3, 64, 64)
            lr_of_input, lr_of_hr = bicubic_downscale(upscaled, 4), bicubic_downscale(hr, 4)
            aligned = float((lr_of_input - lr_of_hr)[..., 2:-2, 2:-2].abs().mean())
            shifted = float((lr_of_input[..., 1:, 1:] - lr_of_hr[..., :-1, :-1])[..., 2:-2, 2:-2].abs().mean())
            assert aligned < 0.03 and aligned < shifted
        if hasattr(dataset, "cleanup"):
            dataset.cleanup()


def test_in_memory_naive_holds_float_inputs_at_hr_size(photo_dir):
    dataset = InMemoryNaiveSRDataset(photo_dir, scale=4, hr_crop=64)
    cache = DecodedSRCache(photo_dir, scale=4)
    pixels = sum(t.shape[1] * t.shape[2] for t in dataset.targets)
    assert dataset.nbytes == 2 * 3 * pixels * 4  # float32 upscaled input + float32 HR
    assert cache.nbytes == 4 * pixels + 4 * pixels // 16  # uint8 RGBX HR + uint8 RGBX LR


def test_same_seed_same_crops_and_different_seed_different_crops(photo_dir):
    first = [LazyCropSRDataset(photo_dir, 4, 64, seed=5)[i][1] for i in range(4)]
    again = [LazyCropSRDataset(photo_dir, 4, 64, seed=5)[i][1] for i in range(4)]
    other = [LazyCropSRDataset(photo_dir, 4, 64, seed=6)[i][1] for i in range(4)]
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, other))


def _epoch(dataset, workers: int, seed: int) -> torch.Tensor:
    loader = make_loader(dataset, batch_size=2, seed=seed, shuffle=False, num_workers=workers, drop_last=False)
    return torch.cat([hr for _, hr in loader])


def test_workers_draw_different_crops_reproducibly(photo_dir):
    # Every image listed twice: with 2 workers each copy goes to a different worker, which must crop differently.
    paths = sorted(photo_dir.glob("*.png"))[:2]
    dataset = LazyCropSRDataset(paths * 2, scale=4, hr_crop=64, augment=False)
    hr = _epoch(dataset, workers=2, seed=0)  # batches [p0, p1] to worker 0, [p0, p1] to worker 1
    assert not torch.equal(hr[0], hr[2]) and not torch.equal(hr[1], hr[3])
    assert torch.equal(hr, _epoch(dataset, workers=2, seed=0))  # one seed reproduces every worker
    assert not torch.equal(hr, _epoch(dataset, workers=2, seed=1))


def test_ranks_draw_different_crops(photo_dir):
    dataset = LazyCropSRDataset(photo_dir, scale=4, hr_crop=64, augment=False)
    rank0 = make_loader(dataset, 6, seed=0, rank=0, shuffle=False, num_workers=1)
    rank1 = make_loader(dataset, 6, seed=0, rank=1, shuffle=False, num_workers=1)
    assert not torch.equal(next(iter(rank0))[1], next(iter(rank1))[1])


def test_crop_not_divisible_by_scale_is_refused(photo_dir):
    with pytest.raises(ValueError, match="hr_crop=126 is not a multiple of scale=4"):
        LazyCropSRDataset(photo_dir, scale=4, hr_crop=126)
    with pytest.raises(ValueError, match="scale must be one of"):
        LazyCropSRDataset(photo_dir, scale=5, hr_crop=125)


def test_image_smaller_than_the_crop_names_the_file(photo_dir, tmp_path):
    Image.new("RGB", (100, 60), "white").save(tmp_path / "small.png")
    dataset = LazyCropSRDataset([tmp_path / "small.png"], scale=4, hr_crop=64)
    with pytest.raises(ImageTooSmallError, match="small.png: image is 100x60"):
        dataset[0]
    cache = DecodedSRCache([tmp_path / "small.png"], scale=4)
    with pytest.raises(ValueError, match="small.png"):
        cache.sample(2, 64, torch.Generator())


def test_corrupt_image_names_the_file(tmp_path):
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(BadImageError, match="broken.jpg"):
        LazyCropSRDataset([tmp_path / "broken.jpg"], scale=2, hr_crop=32)[0]


def test_disk_cache_is_reused_then_rebuilt_when_a_source_changes(photo_dir, tmp_path):
    import shutil

    photos = tmp_path / "photos"
    shutil.copytree(photo_dir, photos)
    first = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    assert first.rebuilt
    second = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    assert not second.rebuilt and torch.equal(first.image(1)[1], second.image(1)[1])
    changed = photos / "img1.png"
    Image.fromarray(np.full((481, 321, 3), 200, np.uint8)).save(changed)
    third = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    assert third.rebuilt and int(third.image(1)[1].float().mean().round()) == 200


def test_cached_loader_yields_float_batches(photo_dir):
    loader = CachedCropLoader(DecodedSRCache(photo_dir, 4), batch_size=8, hr_crop=64, batches_per_epoch=3, seed=1)
    batches = list(loader)
    assert len(batches) == 3 and batches[0][0].dtype == torch.float32 and batches[0][1].shape == (8, 3, 64, 64)
    again = list(CachedCropLoader(DecodedSRCache(photo_dir, 4), 8, 64, 3, seed=1))
    assert all(torch.equal(a[1], b[1]) for a, b in zip(batches, again))


def test_eval_dataset_gives_whole_mod_cropped_images(photo_dir):
    dataset = SREvalDataset(photo_dir, scale=3)
    for index in range(len(dataset)):
        lr, hr = dataset[index]
        assert hr.shape[1] % 3 == 0 and hr.shape[2] % 3 == 0
        assert lr.shape[1:] == (hr.shape[1] // 3, hr.shape[2] // 3)


def test_cache_batches_where_every_sample_is_turned(photo_dir):
    # A batch whose every crop is transposed once came out Fortran-ordered and could not be viewed as bytes.
    cache = DecodedSRCache(photo_dir, scale=4)
    for seed in range(40):
        lr, hr = cache.sample(1, 64, torch.Generator().manual_seed(seed))
        assert lr.shape == (1, 3, 16, 16) and hr.shape == (1, 3, 64, 64)
