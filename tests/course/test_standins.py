"""The offline stand-ins are written in the real formats, so the same loaders read them."""

from __future__ import annotations

import numpy as np
from PIL import Image

from helpers.cifar import cifar10_class_names, load_cifar10
from helpers.course.data import bsds300_split, check_bsds300_layout, prepare_bsds300, prepare_cifar10
from helpers.course.standins import SR_TEST_PHOTOS, STANDIN_MARKER


def test_sr_standin_has_the_bsds300_layout(tmp_path):
    source = prepare_bsds300(tmp_path, offline=True)
    assert source.is_standin and "stand-in" in source.name and "COURSE_OFFLINE" in source.note
    counts = check_bsds300_layout(source.root)
    assert counts["train"] >= 15 and counts["test"] >= 3
    for split in ("train", "test"):
        ids = (source.root / f"iids_{split}.txt").read_text().split()
        assert sorted(ids) == sorted(p.stem for p in bsds300_split(source.root, split))
    test_photos = {p.stem.rsplit("_", 1)[0] for p in bsds300_split(source.root, "test")}
    train_photos = {p.stem.rsplit("_", 1)[0] for p in bsds300_split(source.root, "train")}
    assert test_photos == set(SR_TEST_PHOTOS) and not test_photos & train_photos  # held out
    for path in bsds300_split(source.root, "train"):
        with Image.open(path) as image:
            assert image.format == "JPEG" and image.mode == "RGB" and sorted(image.size) == [321, 481]
    assert (source.root / STANDIN_MARKER).is_file()


def test_cifar_standin_reads_with_load_cifar10(tmp_path):
    source = prepare_cifar10(tmp_path, offline=True)
    assert source.is_standin
    images, labels = load_cifar10(source.root, train=True)
    test_images, test_labels = load_cifar10(source.root, train=False)
    assert images.shape == (5000, 3, 32, 32) and test_images.shape == (1000, 3, 32, 32)
    assert np.bincount(labels.numpy()).tolist() == [500] * 10
    assert np.bincount(test_labels.numpy()).tolist() == [100] * 10
    assert len(set(cifar10_class_names(source.root))) == 10
    assert images.float().std() > 20  # real pixels, not a constant fill


def test_standin_is_reused_not_rewritten(tmp_path):
    first = prepare_bsds300(tmp_path, offline=True)
    stamp = (first.root / STANDIN_MARKER).stat().st_mtime_ns
    second = prepare_bsds300(tmp_path, offline=True)
    assert (second.root / STANDIN_MARKER).stat().st_mtime_ns == stamp
