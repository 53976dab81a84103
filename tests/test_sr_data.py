"""Super-resolution data: aligned lazy crops, determinism and worker streams, clear errors, evaluation pairs, and
paired flips, rotations and colour changes."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms.functional import center_crop, pil_to_tensor

from helpers import sr_data
from helpers.images import BadImageError, ImageTooSmallError
from helpers.loading import make_loader
from helpers.sr_cache import DecodedSRCache
from helpers.sr_data import LazyCropSRDataset, PairedSRAugment, SREvalDataset, bicubic_downscale, paired_dihedral

from .conftest import interior_gap


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_lazy_crop_pairs_align(photo_dir, scale):
    dataset = LazyCropSRDataset(photo_dir, scale=scale, hr_crop=16 * scale, seed=0)
    for index in range(len(dataset)):
        lr, hr = dataset[index]
        assert lr.shape == (3, dataset.hr_crop // scale, dataset.hr_crop // scale)
        assert hr.shape == (3, dataset.hr_crop, dataset.hr_crop)
        assert float(lr.min()) >= 0 and float(lr.max()) <= 1
        assert interior_gap(lr, hr, scale) < 1e-5  # the LR is made from this very crop


def test_same_seed_same_crops_and_different_seed_different_crops(photo_dir):
    first = [LazyCropSRDataset(photo_dir, scale=4, hr_crop=64, seed=5)[i][1] for i in range(4)]
    again = [LazyCropSRDataset(photo_dir, scale=4, hr_crop=64, seed=5)[i][1] for i in range(4)]
    other = [LazyCropSRDataset(photo_dir, scale=4, hr_crop=64, seed=6)[i][1] for i in range(4)]
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
        cache.sample(2, hr_crop=64, generator=torch.Generator())


def test_corrupt_image_names_the_file(tmp_path):
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(BadImageError, match="broken.jpg"):
        LazyCropSRDataset([tmp_path / "broken.jpg"], scale=2, hr_crop=32)[0]


def test_eval_dataset_gives_whole_mod_cropped_images(photo_dir):
    dataset = SREvalDataset(photo_dir, scale=3)
    for index in range(len(dataset)):
        lr, hr = dataset[index]
        assert hr.shape[1] % 3 == 0 and hr.shape[2] % 3 == 0
        assert lr.shape[1:] == (hr.shape[1] // 3, hr.shape[2] // 3)


def test_paired_dihedral_keeps_pairs_aligned():
    torch.manual_seed(0)
    hr = torch.rand(32, 3, 16, 16)
    lr = bicubic_downscale(hr, 4)
    aug_lr, aug_hr = paired_dihedral(lr, hr, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(bicubic_downscale(aug_hr, 4), aug_lr, atol=1e-5, rtol=0)
    changed = [not torch.equal(a, b) for a, b in zip(aug_hr, hr)]
    assert 20 < sum(changed) < 32  # 7 of 8 transforms change a sample; each sample drew its own


def test_paired_sr_augment_applies_the_same_colour_change():
    torch.manual_seed(0)
    hr = torch.rand(16, 3, 16, 16)
    lr = bicubic_downscale(hr, 4)
    aug_lr, aug_hr = PairedSRAugment(jitter=0.4, jitter_p=1.0)(lr, hr)
    # brightness/contrast/saturation act per pixel and on image means; downscaling commutes closely enough
    gap = (bicubic_downscale(aug_hr, 4) - aug_lr).abs().mean()
    assert gap < 0.02
    assert (aug_hr - hr).abs().mean() > 0.02  # and the colours did change


# --- the options a replaced script may need: the Y channel, PIL's resampling, DataLoader-like epochs -----------


def test_rgb_to_luma_is_pils_ycbcr_y_exactly_and_in_unit_range_for_floats():
    from helpers.sr_data import rgb_to_luma

    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (96, 128, 3), dtype=np.uint8)
    pixels[0, :3] = [[0, 0, 0], [255, 255, 255], [255, 0, 0]]
    pil = np.asarray(Image.fromarray(pixels).convert("YCbCr"))[..., 0]
    rgb = torch.from_numpy(pixels).permute(2, 0, 1).contiguous()
    y = rgb_to_luma(rgb)
    assert y.shape == (1, 96, 128) and y.dtype == torch.uint8 and np.array_equal(y[0].numpy(), pil)
    assert rgb_to_luma(rgb[None]).shape == (1, 1, 96, 128)
    float_y = rgb_to_luma(rgb.float() / 255)
    assert float(float_y.min()) >= 0 and float(float_y.max()) <= 1  # a model input, not 16..235 as metrics.rgb_to_y
    assert float((float_y - y.float() / 255).abs().max()) < 1.1 / 255  # PIL rounds down, in fixed point
    with pytest.raises(ValueError, match="RGB"):
        rgb_to_luma(torch.zeros(1, 4, 4))


@pytest.mark.parametrize(
    ("resample", "filter_", "levels"),
    [("pil-bilinear", Image.Resampling.BILINEAR, 1), ("pil-bicubic", Image.Resampling.BICUBIC, 3)],
)
def test_make_lr_with_pils_filters_is_pils_resize(photo_dir, resample, filter_, levels):
    from helpers.sr_data import make_lr

    image = Image.open(sorted(photo_dir.glob("*.png"))[0]).convert("RGB").crop((0, 0, 120, 96))
    hr = torch.from_numpy(np.array(image)).permute(2, 0, 1).contiguous()
    for scale in (2, 3, 4):
        pil = np.asarray(image.resize((120 // scale, 96 // scale), filter_)).astype(int)
        ours = make_lr(hr, scale, resample).permute(1, 2, 0).numpy().astype(int)
        assert ours.shape == pil.shape and np.abs(ours - pil).max() <= levels
        assert torch.equal(
            make_lr(hr.float() / 255, scale, resample)[None], make_lr(hr[None].float() / 255, scale, resample)
        )
    assert torch.equal(make_lr(hr, 4), bicubic_downscale(hr, 4))  # the default: MATLAB's bicubic, as papers
    with pytest.raises(ValueError, match="lr_resample"):
        make_lr(hr, 4, "nearest")


def test_epoch_batches_are_a_dataloaders_unless_a_count_is_given():
    from helpers.sr_data import epoch_batches

    assert epoch_batches(200, 64, None, False) == (4, 8)  # 200 images in 64s: 3 full batches and one of 8
    assert epoch_batches(200, 64, None, True) == (3, 64)
    assert epoch_batches(128, 64, None, False) == (2, 64)
    assert epoch_batches(10, 64, None, False) == (1, 64)  # fewer images than a batch: one full batch of crops
    assert epoch_batches(200, 64, 7, False) == (7, 64)


def test_lazy_crops_reject_unknown_options(photo_dir):
    with pytest.raises(ValueError, match="channels"):
        LazyCropSRDataset(photo_dir, channels="ycbcr")
    with pytest.raises(ValueError, match="crop"):
        LazyCropSRDataset(photo_dir, crop="corner")
    said = repr(LazyCropSRDataset(photo_dir, scale=4, hr_crop=64))
    assert "random 64-px crops" in said and "flip/rot90" in said and "matlab-bicubic" in said and "RGB" in said


def test_make_lr_rounds_uint8_levels_to_the_nearest():
    """The uint8 LR is the float result rounded, not truncated (truncating is half a level darker on average)."""
    from helpers.sr_data import make_lr

    hr = torch.randint(0, 256, (3, 64, 64), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    exact = make_lr(hr.float() / 255, 4, "pil-bilinear")
    assert torch.equal(make_lr(hr, 4, "pil-bilinear"), exact.mul(255).round().to(torch.uint8))


def _photo(tmp_path, width: int, height: int):
    rng = np.random.default_rng(width * height)
    path = tmp_path / f"p{width}x{height}.png"
    Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(path)
    return path


class TestCentreCropAndWorkerSeeds:
    """LazyCropSRDataset's centre crop is torchvision's CenterCrop to the pixel (its rounding of a half-pixel margin),
    and in a DataLoader worker the dataset's own seed still changes the crops drawn."""

    def test_the_centre_crop_is_torchvisions_with_odd_margins(self, tmp_path):
        for width, height in ((23, 30), (30, 25), (27, 27)):
            path = _photo(tmp_path, width, height)
            _, hr = LazyCropSRDataset([path], scale=2, hr_crop=8, crop="center", augment=False)[0]
            expected = center_crop(pil_to_tensor(Image.open(path).convert("RGB")), [8, 8])
            assert torch.equal((hr * 255).round().to(torch.uint8), expected), (width, height)

    def test_in_a_worker_the_datasets_seed_still_changes_the_crops(self, tmp_path, monkeypatch):
        path = _photo(tmp_path, 64, 64)
        monkeypatch.setattr(sr_data, "get_worker_info", lambda: SimpleNamespace(id=0, seed=1234))

        def crops(seed: int) -> list[torch.Tensor]:
            dataset = LazyCropSRDataset([path], scale=2, hr_crop=8, seed=seed)
            return [dataset[0][1] for _ in range(4)]

        assert all(torch.equal(a, b) for a, b in zip(crops(0), crops(0)))
        assert not all(torch.equal(a, b) for a, b in zip(crops(0), crops(1)))
