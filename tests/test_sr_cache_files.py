"""The SR cache's files: the stores are mapped from the descriptor that was checked to be a regular file (a FIFO put
at hr.u8 after its check is named, never opened blocking), and the content fingerprint reads each image a MiB at a
time (a photograph with a gigabyte appended costs no gigabyte of memory), with the same key as before, so existing
caches are kept."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from pathlib import Path

import numpy as np
from PIL import Image

from helpers import sr_cache
from helpers.safe_open import NotRegularFileError

from .test_safe_open import _within


def _images(folder: Path, count: int = 2) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        Image.fromarray(np.random.default_rng(i).integers(0, 256, (32, 40, 3), dtype=np.uint8)).save(
            folder / f"{i}.png"
        )
        paths.append(folder / f"{i}.png")
    return paths


def test_a_fifo_put_at_a_store_after_its_check_is_named_not_opened(tmp_path, monkeypatch):
    paths = _images(tmp_path / "photos")
    folder = sr_cache.DecodedSRCache(paths, scale=2, cache_dir=tmp_path / "cache").cache_folder
    assert folder is not None
    real, checks = sr_cache.check_regular, []

    def check_then_swap(path, **kwargs):  # the race made certain: hr.u8 becomes a FIFO right after it is checked
        info = real(path, **kwargs)
        checks.append(Path(path).name)
        if checks.count("hr.u8") == 2 and Path(path).name == "hr.u8":  # the check just before the mapping
            os.replace(path, tmp_path / "kept.u8")
            os.mkfifo(path)
        return info

    monkeypatch.setattr(sr_cache, "check_regular", check_then_swap)
    try:
        _within(20, lambda: sr_cache.DecodedSRCache(paths, scale=2, cache_dir=tmp_path / "cache"))
    except NotRegularFileError as error:
        assert "hr.u8: is a FIFO (named pipe)" in str(error)
    else:
        raise AssertionError("a FIFO was mapped as the cache's store")


def test_the_fingerprint_streams_each_image_and_keeps_its_key(tmp_path):
    paths = _images(tmp_path / "photos", 1)
    with open(paths[0], "ab") as f:  # PNG readers stop at IEND: 64 MiB after it change nothing but the bytes
        f.write(os.urandom(1 << 20) * 64)
    shapes = [(32, 40)]
    tracemalloc.start()
    try:
        key = sr_cache._fingerprint(paths, 2, shapes)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak / 2**20:.0f} MiB to fingerprint a 64 MiB file"
    digest = hashlib.blake2b(b"decoded-cache v4 (HW RGBX) x2", digest_size=16)  # the key as it was computed before
    digest.update(f"{paths[0].resolve()}\0{32}x{40}\0".encode())
    digest.update(hashlib.blake2b(paths[0].read_bytes(), digest_size=16).digest())
    assert key == digest.hexdigest()
