"""docs/adopting.md's adoption diffs, run on small stand-in data: the data paths of an ESPCN super-resolution script
(BSDS300 photographs, the Y of PIL's YCbCr, a centre crop, LR by torchvision's Resize on the PIL image, a shuffled
DataLoader) and of a torchvision CIFAR10 classifier script (RandomCrop(32, padding=4) + RandomHorizontalFlip +
Normalize, a shuffled DataLoader), each written here in a few lines of our own, against the swapped-in helpers: the
same batches per epoch, the same channel, the same LR resampling, the same augmentation. And the ImageFolder recipe
against torchvision's references/classification/train.py, hunk by hunk: the store's crops of the reference's
RandomResizedCrop family, the preset's normalisation on the device, workers within the CPU budget, channels_last,
bf16 only where native."""

from __future__ import annotations

import argparse
import os
import re
import textwrap
from pathlib import Path
from types import SimpleNamespace

import kornia.augmentation as K
import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms as T
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchvision.datasets import CIFAR10, ImageFolder

from helpers import step as step_module
from helpers.augment import ToUnitFloat
from helpers.loading import DeviceTensorLoader
from helpers.sr_cache import CachedCropLoader, DecodedSRCache, DeviceSRCropLoader
from helpers.sr_data import LazyCropSRDataset
from helpers.step import native_precisions

SCALE, CROP, BATCH = 4, 64, 4  # the script's defaults are 256-px crops (256 - 256 % scale) and batches of 64


class ScriptSRDataset(Dataset):
    """The SR script's data path: the Y of PIL's YCbCr, a centre crop, LR by Resize on the PIL crop, ToTensor."""

    def __init__(self, paths, crop: int, scale: int) -> None:
        self.paths = paths
        self.lr = T.Compose([T.CenterCrop(crop), T.Resize(crop // scale), T.ToTensor()])
        self.hr = T.Compose([T.CenterCrop(crop), T.ToTensor()])

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int):
        y, _, _ = Image.open(self.paths[index]).convert("YCbCr").split()
        return self.lr(y), self.hr(y)


@pytest.fixture(scope="module")
def sr_folder(tmp_path_factory):
    """Ten small photographs (odd sizes), so that batches of 4 leave a remainder of 2, as 200 images in 64s leave 8."""
    from skimage import data as skdata

    folder = tmp_path_factory.mktemp("bsds")
    photo = skdata.astronaut()
    for i in range(10):
        h, w = 80 + 3 * i, 96 + 5 * i
        Image.fromarray(np.ascontiguousarray(photo[7 * i : 7 * i + h, 11 * i : 11 * i + w])).save(folder / f"{i}.png")
    return folder


def test_step_one_the_lazy_dataset_is_the_scripts_dataset_exactly(sr_folder):
    paths = sorted(sr_folder.glob("*.png"))
    script = ScriptSRDataset(paths, CROP, SCALE)
    ours = LazyCropSRDataset(
        paths, scale=SCALE, hr_crop=CROP, crop="center", channels="y", lr_resample="pil-bilinear", augment=False
    )
    for index in range(len(paths)):
        for theirs, mine in zip(script[index], ours[index]):
            assert mine.shape == theirs.shape and torch.equal(mine, theirs), index
    assert len(DataLoader(ours, batch_size=BATCH, shuffle=True)) == len(DataLoader(script, batch_size=BATCH)) == 3


def _find_window(image: torch.Tensor, crop: torch.Tensor, step: int) -> float:
    """The smallest max |difference| between `crop` and any step-aligned window of `image` (both (1, H, W))."""
    size = crop.shape[-1]
    return min(
        float((image[:, y : y + size, x : x + size] - crop).abs().max())
        for y in range(0, image.shape[-2] - size + 1, step)
        for x in range(0, image.shape[-1] - size + 1, step)
    )


def _script_y(path) -> torch.Tensor:
    return T.functional.to_tensor(Image.open(path).convert("YCbCr").getchannel(0))


@pytest.mark.parametrize("loader_kind", ["device", "cached"])
def test_step_two_the_cache_keeps_the_scripts_batches_channel_and_lr(sr_folder, loader_kind, capsys):
    paths = sorted(sr_folder.glob("*.png"))
    script = DataLoader(ScriptSRDataset(paths, CROP, SCALE), batch_size=BATCH, shuffle=True)
    cache = DecodedSRCache(paths, scale=SCALE)
    if loader_kind == "device":
        loader = DeviceSRCropLoader(
            cache, batch_size=BATCH, hr_crop=CROP, channels="y", lr_resample="pil-bilinear", augment=False, seed=0
        )
    else:
        loader = CachedCropLoader(cache, batch_size=BATCH, hr_crop=CROP, channels="y", augment=False, seed=0)
    print(loader)  # the diff prints what the loader does
    said = capsys.readouterr().out
    assert "3 batches an epoch of 4 (the last of 2)" in said and "no flips or rotations" in said
    assert "Y channels" in said
    assert [len(hr) for _, hr in loader] == [len(hr) for _, hr in script] == [4, 4, 2]
    lr, hr = next(iter(loader))
    assert lr.shape == (BATCH, 1, CROP // SCALE, CROP // SCALE) and hr.shape == (BATCH, 1, CROP, CROP)
    # every HR crop is a crop of the script's Y image, exactly ...
    whole = DecodedSRCache(paths[:1], scale=SCALE)
    one = (
        DeviceSRCropLoader(whole, batch_size=3, hr_crop=CROP, channels="y", lr_resample="pil-bilinear", augment=False)
        if loader_kind == "device"
        else CachedCropLoader(whole, batch_size=3, hr_crop=CROP, channels="y", augment=False)
    )
    lr, hr = next(iter(one))
    y = _script_y(paths[0])
    for crop in hr:
        assert _find_window(y, crop, SCALE) == 0
    if loader_kind == "device":  # ... and LR is PIL's resize of that very crop (within 1 level of 255)
        for small, crop in zip(lr, hr):
            pixels = Image.fromarray((crop[0] * 255).round().to(torch.uint8).numpy())
            pil = pixels.resize((CROP // SCALE,) * 2, Image.Resampling.BILINEAR)
            assert float((small[0] - T.functional.to_tensor(pil)[0]).abs().max()) <= 1.5 / 255
    else:  # the cached loader's LR is the cache's MATLAB bicubic, and it says so
        assert "LR by the cache's matlab-bicubic" in repr(one)


def test_the_default_loaders_say_what_they_change(sr_folder):
    cache = DecodedSRCache(sorted(sr_folder.glob("*.png")), scale=SCALE)
    said = repr(DeviceSRCropLoader(cache, batch_size=BATCH, hr_crop=CROP))
    assert "a random flip/rot90 per pair" in said and "matlab-bicubic" in said and "RGB channels" in said
    assert "the last of 2" in said  # the remainder is kept, as a DataLoader keeps it
    assert len(DeviceSRCropLoader(cache, batch_size=BATCH, hr_crop=CROP, drop_last=True)) == 2


# --- the CIFAR classifier --------------------------------------------------------------------------------------

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)  # the script's Normalize


def _script_cifar(count: int, transform) -> CIFAR10:
    """torchvision's CIFAR10 holding stand-in pixels: .data NHWC uint8, .targets a list, its own __getitem__."""
    dataset = CIFAR10.__new__(CIFAR10)
    rng = np.random.default_rng(0)
    dataset.data = rng.integers(0, 256, (count, 32, 32, 3), dtype=np.uint8)
    dataset.targets = rng.integers(0, 10, count).tolist()
    dataset.transform, dataset.target_transform = transform, None
    return dataset


def _device_recipe() -> torch.nn.Sequential:
    """The diff's augment: the script's transforms as kornia batch transforms, a different draw per sample."""
    return torch.nn.Sequential(
        ToUnitFloat(),
        K.RandomCrop((32, 32), padding=4),
        K.RandomHorizontalFlip(),
        K.Normalize(torch.tensor(MEAN), torch.tensor(STD)),
    )


def test_cifar_from_dataset_gives_the_scripts_batches_and_tensors():
    plain = T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])
    trainset = _script_cifar(300, plain)
    script = DataLoader(trainset, batch_size=128, shuffle=False)
    normalize = torch.nn.Sequential(ToUnitFloat(), K.Normalize(torch.tensor(MEAN), torch.tensor(STD)))
    ours = DeviceTensorLoader.from_dataset(trainset, batch_size=128, shuffle=False, augment=normalize)
    assert len(ours) == len(script) == 3 and "the last of 44" in repr(ours)
    for (x_script, y_script), (x_ours, y_ours) in zip(script, ours):
        assert torch.equal(y_script, y_ours)
        assert torch.allclose(x_script, x_ours, atol=1e-5)
    shuffled = DeviceTensorLoader.from_dataset(trainset, batch_size=128)  # shuffle=True, as the script's loader
    labels = torch.cat([y for _, y in shuffled])
    assert sorted(labels.tolist()) == sorted(trainset.targets)  # every sample once an epoch


def _padded_views(image: torch.Tensor) -> torch.Tensor:
    """Every 32-px window of the zero-padded image and of its mirror: what RandomCrop(padding=4) + flip can give."""
    padded = torch.nn.functional.pad(image, [4] * 4)
    views = [padded[:, y : y + 32, x : x + 32] for y in range(9) for x in range(9)]
    return torch.stack(views + [v.flip(-1) for v in views])


def test_cifar_device_augment_draws_what_the_scripts_transforms_draw():
    torch.manual_seed(0)
    trainset = _script_cifar(40, None)
    loader = DeviceTensorLoader.from_dataset(trainset, batch_size=40, shuffle=False, augment=_device_recipe())
    images, _ = next(iter(loader))
    mean, std = torch.tensor(MEAN).view(3, 1, 1), torch.tensor(STD).view(3, 1, 1)
    source = torch.from_numpy(trainset.data).permute(0, 3, 1, 2).float() / 255
    offsets = set()
    for out, image in zip(images, source):
        # both pipelines pad with zeros before Normalize: compare before it, where the padding is 0
        gaps = (_padded_views(image) - (out * std + mean)).abs().amax(dim=(1, 2, 3))
        assert float(gaps.min()) < 1e-5  # a zero-padded crop (or its mirror) of this very image
        offsets.add(int(gaps.argmin()))
    assert len(offsets) > 10  # each sample draws its own crop and flip
    script = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor()])
    sample = script(Image.fromarray(trainset.data[0]))
    assert float((_padded_views(source[0]) - sample).abs().amax(dim=(1, 2, 3)).min()) < 1e-6  # the same family


# --- docs/adopting.md's diffs themselves, executed ---------------------------------------------------------------------


def adoption_diffs() -> list[str]:
    """The code an adoption diff (docs/adopting.md) leaves (context and added lines), with `mine` the helpers package."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "adopting.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```diff\n(.*?)```", text, flags=re.S)
    kept = ["\n".join(line[1:] for line in block.splitlines() if line[:1] in "+ ") for block in blocks]
    return [code.replace("from mine.", "from helpers.") for code in kept]


def test_the_adoption_sr_diffs_run_and_keep_the_scripts_batches(tmp_path, capsys):
    from skimage import data as skdata

    photo = skdata.astronaut()
    for i in range(10):  # 10 images of at least 256 px, in batches of 4: 3 batches, the last of 2
        crop = np.ascontiguousarray(photo[5 * i : 5 * i + 270, 9 * i : 9 * i + 300])
        Image.fromarray(crop).save(tmp_path / f"{i}.png")
    paths = sorted(tmp_path.glob("*.png"))
    sr = [d for d in adoption_diffs() if "LazyCropSRDataset" in d or "DeviceSRCropLoader" in d]
    assert len(sr) == 2
    script = ScriptSRDataset(paths, 256, 4)
    for code in sr:
        opt = SimpleNamespace(upscale_factor=4, batchSize=4, threads=0)
        scope = {"opt": opt, "device": "cpu", "DataLoader": DataLoader}
        exec(code.replace("dataset/BSDS300/images/train", str(tmp_path)), scope)  # noqa: S102 (docs/adopting.md's code)
        loader = scope["training_data_loader"]
        assert [len(hr) for _, hr in loader] == [len(hr) for _, hr in DataLoader(script, batch_size=4)] == [4, 4, 2]
        lr, hr = next(iter(loader))
        assert lr.shape == (4, 1, 64, 64) and hr.shape == (4, 1, 256, 256)
        if "train_set" in scope:
            assert all(torch.equal(a, b) for i in range(10) for a, b in zip(scope["train_set"][i], script[i]))
    assert "3 batches an epoch of 4 (the last of 2)" in capsys.readouterr().out


def test_the_adoption_cifar_diff_runs_and_keeps_the_scripts_batches(capsys):
    (code,) = [d for d in adoption_diffs() if "CIFAR10" in d]
    stand_in = _script_cifar(300, None)
    torchvision = SimpleNamespace(datasets=SimpleNamespace(CIFAR10=lambda **options: stand_in))
    scope = {"torch": torch, "torchvision": torchvision, "device": "cpu"}
    exec(code, scope)  # noqa: S102 (docs/adopting.md's code)
    script = DataLoader(_script_cifar(300, T.ToTensor()), batch_size=128, shuffle=True)
    loader = scope["trainloader"]
    assert [len(y) for _, y in loader] == [len(y) for _, y in script] == [128, 128, 44]
    images, _ = next(iter(loader))
    assert images.shape == (128, 3, 32, 32) and images.dtype == torch.float32
    assert "3 batches an epoch of 128, the last of 44, shuffled" in capsys.readouterr().out


# --- torchvision's references/classification/train.py, its training data path swapped ---------------------------

IMAGENET_MEAN_STD = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))  # presets.ClassificationPresetTrain's defaults


def reference_hunks() -> list[tuple[str, str]]:
    """(header, code) for each hunk of docs/adopting.md's diff against torchvision's classification reference: the lines it
    keeps and adds, dedented, with `mine` the helpers package."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "adopting.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```diff\n(.*?)```", text, flags=re.S) if "ClassificationPresetTrain" in b]
    hunks = []
    for part in re.split(r"^@@ (.*?) @@\n", block, flags=re.M)[1:]:
        if not hunks or hunks[-1][1] is not None:
            hunks.append((part, None))
            continue
        kept = "\n".join(line[1:] for line in part.splitlines() if line[:1] in "+ ")
        hunks[-1] = (hunks[-1][0], textwrap.dedent(kept).replace("from mine.", "from helpers."))
    return hunks  # type: ignore[return-value]


@pytest.fixture(scope="module")
def train_folder(tmp_path_factory):
    """An ImageFolder train/ of small JPEGs, two classes, as the reference reads it."""
    from skimage import data as skdata

    root = tmp_path_factory.mktemp("imagenet") / "train"
    photo = skdata.astronaut()
    for label, name in enumerate(("n01", "n02")):
        (root / name).mkdir(parents=True)
        for i in range(5):
            crop = np.ascontiguousarray(photo[20 * i + 40 * label :][:90, 10 * i :][:, :120])
            Image.fromarray(crop).save(root / name / f"{i}.JPEG", quality=90)
    return root


def test_the_adoption_torchvision_reference_diff_runs_and_keeps_the_references_meaning(
    train_folder, tmp_path, capsys, monkeypatch
):
    hunks = dict(reference_hunks())
    assert len(hunks) == 6
    store_hunk, loader_hunk, model_hunk, setup_hunk, batch_hunk, args_hunk = hunks.values()
    parser = argparse.ArgumentParser()
    exec(args_hunk, {"parser": parser})  # noqa: S102 (docs/adopting.md's code)
    args = parser.parse_args(["--store", str(tmp_path / "store"), "--store-short-side", "48"])
    args.workers, args.batch_size, args.amp = 16, 4, False  # the reference's default workers: 16
    scope = {"torch": torch, "torchvision": torchvision, "args": args, "traindir": str(train_folder)}
    scope["train_crop_size"] = 32
    exec(store_hunk, scope)  # noqa: S102
    dataset = scope["dataset"]
    said = capsys.readouterr().out
    assert "StoreCropDataset: 10 samples, uint8 (3, 32, 32) RandomResizedCrop" in said and "not normalised" in said
    assert dataset.classes == ["n01", "n02"] and len(dataset) == 10
    assert dataset.store.image(0).shape == (48, 64, 3)  # short side 48, aspect kept: the detail the store keeps
    assert dataset.store.nbytes == sum(3 * h * w for h, w, _ in (dataset.store.image(i).shape for i in range(10)))
    scope.update(train_sampler=torch.utils.data.RandomSampler(dataset), collate_fn=None)
    threads_before = torch.get_num_threads()
    try:
        exec(loader_hunk, scope)  # noqa: S102
        loader = scope["data_loader"]
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        assert 0 <= loader.num_workers <= max(0, cores - 1) < 16 and loader.persistent_workers == (
            loader.num_workers > 0
        )
        assert loader.num_workers + torch.get_num_threads() <= max(cores, 2)
    finally:
        torch.set_num_threads(threads_before)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
    device = torch.device("cpu")
    exec(model_hunk, {"model": model, "device": device, "torch": torch})  # noqa: S102
    assert model[0].weight.is_contiguous(memory_format=torch.channels_last)
    step_scope = {"model": model, "device": device, "args": args, "torch": torch}
    exec(setup_hunk, step_scope)  # noqa: S102 (model.train() and the normalisation, once per epoch)
    image, target = next(iter(loader))
    assert image.dtype == torch.uint8 and image.shape == (4, 3, 32, 32)  # a quarter of float32's bytes
    batch_scope = step_scope | {"image": image, "target": target}
    exec(batch_hunk, batch_scope)  # noqa: S102 (one batch of the loop)
    mean, std = IMAGENET_MEAN_STD
    reference = T.Normalize(mean, std)(T.ConvertImageDtype(torch.float)(image))  # the preset's last two steps
    torch.testing.assert_close(batch_scope["image"], reference, atol=1e-6, rtol=1e-5)  # the same normalisation
    assert batch_scope["image"].is_contiguous(memory_format=torch.channels_last)
    native = "bf16" in native_precisions(device)
    assert step_scope["use_bf16"] == native  # bf16 only where the device runs it natively (args.amp is off)
    for natively, amp, expected in (
        (["fp32"], False, False),
        (["fp32", "bf16"], False, True),
        (["fp32", "bf16"], True, False),
    ):
        monkeypatch.setattr(step_module, "native_precisions", lambda device, natively=natively: natively)
        args.amp, other = amp, {"model": model, "device": device, "args": args, "torch": torch}
        exec(setup_hunk, other)  # noqa: S102
        assert other["use_bf16"] is expected, (natively, amp)  # the reference's own --amp (fp16) stays as it was
    args.amp = False
    assert batch_scope["output"].shape == (4, 2) and batch_scope["output"].dtype == torch.float32


def test_the_store_crops_are_the_references_random_resized_crop_family(train_folder, tmp_path):
    """The store's crop is torchvision's RandomResizedCrop box on the stored image, bilinear, then maybe flipped."""
    from helpers.resized_store import ResizedStore, StoreCropDataset, build_resized_store

    folder = ImageFolder(str(train_folder))
    store = ResizedStore(build_resized_store(folder.samples, tmp_path / "s", short_side=90))  # the photos' own size
    dataset = StoreCropDataset(store, 32, flip=False)
    torch.manual_seed(0)
    crop, label = dataset[3]
    torch.manual_seed(0)
    box = T.RandomResizedCrop.get_params(torch.empty(1).expand(3, 90, 120), [0.08, 1.0], [3 / 4, 4 / 3])
    image = Image.open(folder.samples[3][0]).convert("RGB")
    top, left, height, width = box
    expected = T.functional.pil_to_tensor(
        image.crop((left, top, left + width, top + height)).resize((32, 32), Image.Resampling.BILINEAR)
    )
    assert label == folder.samples[3][1] and crop.shape == (3, 32, 32)
    assert float((crop.float() - expected.float()).abs().mean()) < 1.0  # the same crop, decoded once, at full size
