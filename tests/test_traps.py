"""No silent traps in the library's defaults: no dataset's statistics behind a generic name (only what is named for a
dataset defaults to its mean and std), make_loader's drop_last stated in its docstring and its repr, the
channels_last output stated where it is chosen, every dataset and loader states what it yields, jpeg_crop's
docstring promises only the reductions that happen, and the doctor says pin_memory does nothing without a GPU."""

from __future__ import annotations

import ast
import inspect
import random
import warnings

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, TensorDataset

from helpers import augment, device_crop, jpeg_crop, loading
from helpers.augment import CIFAR10_MEAN, CIFAR10_STD, cifar_train_augment, denormalize, normalize_only
from helpers.device_crop import IMAGENET_MEAN, IMAGENET_STD, device_train_augment
from helpers.doctor import diagnose
from helpers.jpeg_crop import ReducedCropDataset, jpeg_reduction, random_resized_crop_box
from helpers.loading import make_loader
from helpers.prefetch import BackgroundPrefetcher, PrefetchLoader
from helpers.resized_store import ResizedStore, StoreCropDataset, build_resized_store
from helpers.sr_data import SREvalDataset

from .test_layering import HELPERS, LIBRARY

DATASET_NAMES = ("cifar", "imagenet")  # a function named for a dataset may default to its statistics


def test_the_generic_normalisations_require_their_statistics():
    images = torch.zeros(1, 3, 4, 4, dtype=torch.uint8)
    for call in (lambda: normalize_only(), lambda: denormalize(images.float()), lambda: device_train_augment(24)):
        with pytest.raises(TypeError, match="mean|std"):
            call()
    assert normalize_only(IMAGENET_MEAN, IMAGENET_STD)[0].mean == IMAGENET_MEAN  # the ones given, nothing else


def test_no_library_function_hides_statistics_behind_a_generic_name():
    """A `mean` or `std` parameter with a default is allowed only in a function named for its dataset."""
    hidden = []
    for path in LIBRARY:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            arguments = node.args
            positional = arguments.posonlyargs + arguments.args
            defaults = dict(
                zip([a.arg for a in positional[len(positional) - len(arguments.defaults) :]], arguments.defaults)
            )
            defaults |= {a.arg: d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None}
            for name in ("mean", "std"):
                default = defaults.get(name)
                generic = not any(word in node.name.lower() for word in DATASET_NAMES)
                if (
                    default is not None
                    and not (isinstance(default, ast.Constant) and default.value is None)
                    and generic
                ):
                    hidden.append(f"{path.name}:{node.lineno} {node.name}({name}=...)")
    assert not hidden, f"statistics behind a generic name: {hidden}"


def test_make_loader_says_it_drops_the_last_short_batch():
    dataset = TensorDataset(torch.arange(10.0))
    dropped = make_loader(dataset, 4, shuffle=False)
    assert [len(b[0]) for b in dropped] == [4, 4]
    assert repr(dropped) == (
        "DataLoader (make_loader): 2 batches an epoch of 4, the last 2 samples dropped (drop_last=True; DataLoader's "
        "default keeps them), in order, 0 workers, seed 0"
    )
    kept = make_loader(dataset, 4, drop_last=False, seed=3, rank=1)
    assert [len(b[0]) for b in kept] == [4, 4, 2] and len(kept) == 3
    assert "3 batches an epoch of 4, the last of 2, shuffled" in repr(kept) and "seed 3, rank 1" in repr(kept)
    assert "2 batches an epoch of 4, shuffled" in repr(make_loader(TensorDataset(torch.arange(8.0)), 4))
    doc = inspect.getdoc(loading.make_loader) or ""
    assert "drop_last=True" in doc and "DataLoader's default" in doc


def test_the_channels_last_output_is_stated_where_it_is_chosen():
    images = torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8)
    for module, layout in (
        (cifar_train_augment(), torch.channels_last),
        (cifar_train_augment(channels_last=False), torch.contiguous_format),
        (normalize_only(CIFAR10_MEAN, CIFAR10_STD), torch.channels_last),
        (normalize_only(CIFAR10_MEAN, CIFAR10_STD, channels_last=False), torch.contiguous_format),
    ):
        said = repr(module)
        out = module(images)
        stated = "channels_last output" if layout == torch.channels_last else "contiguous (NCHW) output"
        assert stated in said and out.is_contiguous(memory_format=layout), said
    for function in (augment.cifar_train_augment, augment.normalize_only, device_crop.device_train_augment):
        assert "channels_last" in (inspect.getdoc(function) or ""), function.__name__


def _own_repr(cls: type) -> bool:
    """True when `cls` or a base of it in the library defines __repr__ (not object's, Dataset's or DataLoader's)."""
    return any("__repr__" in vars(k) for k in cls.__mro__ if k.__module__.startswith("helpers."))


def test_every_library_dataset_and_loader_defines_what_it_says():
    """Classes that yield samples or batches (a public __getitem__ + __len__, or __iter__) define a repr."""
    silent = []
    for path in LIBRARY:
        module = __import__(f"helpers.{path.stem}", fromlist=["_"])
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or name.startswith("_") or getattr(cls, "_is_protocol", False):
                continue
            yields = "__iter__" in vars(cls) or ("__getitem__" in vars(cls) and "__len__" in vars(cls))
            if yields and not _own_repr(cls) and not issubclass(cls, torch.nn.Module):
                silent.append(f"{path.name}: {name}")
    assert not silent, f"these print a default repr: {silent}"
    assert (HELPERS / "loading.py").is_file() and _own_repr(loading.SeededDataLoader)


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jpegs")
    rng = np.random.default_rng(0)
    samples = []
    for i in range(2):
        path = folder / f"{i}.jpg"
        Image.fromarray(rng.integers(0, 256, (40, 56, 3), dtype=np.uint8)).save(path)
        samples.append((str(path), i))
    return folder, samples


def test_each_dataset_and_loader_prints_what_it_yields(jpegs):
    folder, samples = jpegs
    store = ResizedStore(build_resized_store(samples, folder / "store", short_side=32))
    said = {
        "reduced": repr(ReducedCropDataset(samples, 16)),
        "store": repr(StoreCropDataset(store, 16, flip=False)),
        "prefetch": repr(PrefetchLoader(DataLoader(TensorDataset(torch.zeros(4, 3))), "cpu")),
        "background": repr(BackgroundPrefetcher([1, 2], depth=3)),
        "eval": repr(SREvalDataset([p for p, _ in samples], scale=2)),
        "make_loader": repr(make_loader(TensorDataset(torch.zeros(4, 3)), 2)),
    }
    assert not [name for name, text in said.items() if " object at 0x" in text], said
    assert "2 samples, uint8 (3, 16, 16) RandomResizedCrop" in said["reduced"]
    assert said["store"].startswith("StoreCropDataset: 2 samples, uint8 (3, 16, 16)") and "no flip" in said["store"]
    assert "short side at most 32 px" in said["store"] and "not normalised" in said["store"]
    assert "moved to cpu when asked (no side stream)" in said["prefetch"] and "3 ahead" in said["background"]


def test_jpeg_crops_docstring_promises_only_the_reductions_that_happen():
    """At 224 px a 500x375 photograph's boxes never reduce (as the docstring says); a 4000x3000 one's mostly do."""
    assert "a 500x375 photograph never" in (jpeg_crop.__doc__ or "")
    assert "decodes at a quarter or less" not in (jpeg_crop.__doc__ or "")
    random.seed(0)
    torch.manual_seed(0)
    small = [jpeg_reduction(random_resized_crop_box(500, 375), 224) for _ in range(500)]
    large = [jpeg_reduction(random_resized_crop_box(4000, 3000), 224) for _ in range(500)]
    assert set(small) == {1}
    assert sum(f >= 2 for f in large) > 250 and max(large) >= 4


def test_the_doctor_says_pin_memory_does_nothing_without_a_gpu():
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(batch):
        inputs, targets = batch
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()

    loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randint(0, 2, (32,))), batch_size=4, pin_memory=True)
    with warnings.catch_warnings():  # torch's own warning, where there is no accelerator
        warnings.simplefilter("ignore", UserWarning)
        text = str(diagnose(loader, step, device="cpu", budget_s=0.05, blocks=1, steps=3, notify=None))
    assert "pin_memory=True does nothing without a GPU" in text
