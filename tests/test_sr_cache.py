"""The decoded uint8 cache and its loaders: aligned pairs within rounding, a disk cache reused and rebuilt (also when
damaged), a full disk as a clear error, concurrent builders (one killed) publishing one whole cache, the zero-CPU device
loader, and the background prefetcher."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from helpers import sr_cache
from helpers.images import BadImageError, ImageTooSmallError
from helpers.safe_open import NotRegularFileError
from helpers.sr_cache import BackgroundPrefetcher, CachedCropLoader, DecodedSRCache, DeviceSRCropLoader
from helpers.sr_data import bicubic_downscale, dihedral

from .conftest import interior_gap, shifted_gap
from .test_safe_open import _within

ROOT = Path(__file__).resolve().parents[1]


def test_cache_pairs_align_within_uint8_rounding(photo_dir):
    cache = DecodedSRCache(photo_dir, scale=4)
    lr, hr = cache.sample(32, hr_crop=64, generator=torch.Generator().manual_seed(0))
    assert lr.dtype == torch.uint8 and lr.shape == (32, 3, 16, 16) and hr.shape == (32, 3, 64, 64)
    lr, hr = lr.float() / 255, hr.float() / 255
    # the cache makes LR from uint8 as MATLAB does, rounding and saturating after each pass: a few levels at edges
    assert interior_gap(lr, hr, 4) <= 4 / 255
    assert shifted_gap(lr, hr, 4) > 10 / 255  # and a one-pixel shift would be plainly visible


def test_disk_cache_is_reused_then_rebuilt_when_a_source_changes(photo_dir, tmp_path):
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
    loader = CachedCropLoader(DecodedSRCache(photo_dir, scale=4), batch_size=8, hr_crop=64, batches_per_epoch=3, seed=1)
    batches = list(loader)
    assert len(batches) == 3 and batches[0][0].dtype == torch.float32 and batches[0][1].shape == (8, 3, 64, 64)
    again = list(
        CachedCropLoader(DecodedSRCache(photo_dir, scale=4), batch_size=8, hr_crop=64, batches_per_epoch=3, seed=1)
    )
    assert all(torch.equal(a[1], b[1]) for a, b in zip(batches, again))


def test_cache_batches_where_every_sample_is_turned(photo_dir):
    # A batch whose every crop is transposed once came out Fortran-ordered and could not be viewed as bytes.
    cache = DecodedSRCache(photo_dir, scale=4)
    for seed in range(40):
        lr, hr = cache.sample(1, hr_crop=64, generator=torch.Generator().manual_seed(seed))
        assert lr.shape == (1, 3, 16, 16) and hr.shape == (1, 3, 64, 64)


def test_device_sr_crop_loader_pairs_align(tmp_path):
    rng = np.random.default_rng(0)
    for i in range(3):
        smooth = rng.integers(0, 256, (40, 50, 3)).astype(np.uint8)
        Image.fromarray(smooth).resize((200, 160), Image.Resampling.BICUBIC).save(tmp_path / f"{i}.png")
    loader = DeviceSRCropLoader(
        DecodedSRCache(tmp_path, scale=4), batch_size=8, hr_crop=64, batches_per_epoch=2, seed=0
    )
    batches = list(loader)
    assert len(batches) == 2
    lr, hr = batches[0]
    assert lr.shape == (8, 3, 16, 16) and hr.shape == (8, 3, 64, 64) and hr.dtype == torch.float32
    torch.testing.assert_close(bicubic_downscale(hr, 4), lr, atol=1e-5, rtol=0)
    # crops really come from the images: each HR crop matches a window of its source at a scale-aligned origin
    cache = DecodedSRCache(tmp_path, scale=4)
    found = 0
    for crop in hr[:4]:
        for index in range(len(cache)):
            whole = cache.image(index)[1].float() / 255
            for choice in range(8):
                undone = crop
                # try every inverse transform, every aligned origin
                candidate = dihedral(undone, choice)
                windows = whole.unfold(1, 64, 4).unfold(2, 64, 4)  # (3, ny, nx, 64, 64)
                match = (windows - candidate[:, None, None]).abs().amax(dim=(0, 3, 4)).min()
                if match < 1e-6:
                    found += 1
                    break
            else:
                continue
            break
    assert found == 4


def test_background_prefetcher_yields_everything_in_order_and_reraises():
    assert list(BackgroundPrefetcher(range(10), depth=2)) == list(range(10))

    def broken():
        yield 1
        raise OSError("disk went away")

    items = iter(BackgroundPrefetcher(broken()))
    assert next(items) == 1
    try:
        next(items)
    except OSError as error:
        assert "disk went away" in str(error)
    else:
        raise AssertionError("the producer's error was swallowed")


def test_background_prefetcher_stops_when_the_consumer_stops():
    before = threading.active_count()
    iterator = iter(BackgroundPrefetcher(iter(range(10**9)), depth=2))
    assert next(iterator) == 0
    iterator.close()  # the consumer walks away mid-stream
    assert threading.active_count() == before


# --- the on-disk cache: damaged files rebuilt, a full disk, concurrent builders with one killed ----------------------


def _copy_photos(photo_dir, folder, count: int = 6):
    folder.mkdir()
    for path in sorted(photo_dir.glob("*.png"))[:count]:
        shutil.copy(path, folder / path.name)
    return folder


def test_a_damaged_meta_file_is_rebuilt_with_a_message(photo_dir, tmp_path):
    photos = _copy_photos(photo_dir, tmp_path / "photos", 2)
    first = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    meta = first.cache_folder / "meta.json"
    for damage in ('{"fingerprint": "abc", "shap', '{"fingerprint": 3}', "[]"):
        meta.write_text(damage)
        with pytest.warns(UserWarning, match=r"meta.json is unreadable.*rebuilding"):
            again = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
        assert again.rebuilt and again.rebuild_reason.startswith("damaged")
        assert torch.equal(again.image(1)[1], first.image(1)[1])


@pytest.mark.parametrize("store", ["hr.u8", "lr.u8"])
def test_a_truncated_store_is_rebuilt_with_a_message(photo_dir, tmp_path, store):
    photos = _copy_photos(photo_dir, tmp_path / "photos", 2)
    cache = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    lr, hr = (t.clone() for t in cache.image(1))
    path = cache.cache_folder / store
    size = path.stat().st_size
    os.truncate(path, size // 2)  # (a cache still mapping the file would now die reading past its end: SIGBUS)
    with pytest.warns(UserWarning, match=rf"{store} holds {size // 2} bytes, {size} expected.*rebuilding"):
        again = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    assert again.rebuilt and path.stat().st_size == size
    assert torch.equal(again.image(1)[0], lr) and torch.equal(again.image(1)[1], hr)


def test_a_full_disk_is_an_error_naming_the_file_before_any_pixel(photo_dir, tmp_path, monkeypatch):
    photos = _copy_photos(photo_dir, tmp_path / "photos", 2)

    def no_space(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    def never(path):
        raise AssertionError(f"decoded {path} although the disk was full")

    monkeypatch.setattr(os, "posix_fallocate", no_space, raising=False)
    monkeypatch.setattr(sr_cache, "load_rgb_image", never)
    with pytest.raises(OSError, match=r"hr.u8: cannot reserve \d+ bytes \(No space left on device\)") as info:
        DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    assert info.value.errno == errno.ENOSPC
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".lock"]  # nothing published, nothing left


FULL_DISK = """
import sys
from helpers.sr_cache import DecodedSRCache
try:
    DecodedSRCache(sys.argv[1], scale=2, cache_dir=sys.argv[2])
except OSError as error:
    print("OSError:", error)
"""


def test_a_really_full_file_system_is_an_error_not_sigbus(photo_dir, tmp_path):
    # A 1 MiB tmpfs in a private mount namespace (root on Linux only): the cache needs several MiB.
    small = tmp_path / "small"
    small.mkdir()
    unshare = shutil.which("unshare")
    mount = f"mount -t tmpfs -o size=1m tmpfs {small}"
    if unshare is None or subprocess.run([unshare, "--mount", "sh", "-c", mount], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root and unshare)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    script = f'{mount} && exec "$0" -c "$1" "$2" "$3"'
    result = subprocess.run(
        [unshare, "--mount", "sh", "-c", script, sys.executable, FULL_DISK, str(photo_dir), str(small / "cache")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"the build died with {result.returncode}: {result.stderr[-2000:]}"
    assert "OSError:" in result.stdout and "hr.u8: cannot reserve" in result.stdout, result.stdout + result.stderr


BUILDER = """
import os, signal, sys, time
from pathlib import Path
from helpers import sr_cache
photos, cache_dir, role = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
flags = cache_dir.parent
if role == "killed":  # stop inside the build, after two images are decoded, and wait for the test's SIGKILL
    real, seen = sr_cache.load_rgb_image, []
    def load(path):
        seen.append(path)
        if len(seen) == 3:
            (flags / "killed-is-inside").touch()
            signal.pause()
        return real(path)
    sr_cache.load_rgb_image = load
else:  # start building only once the other one is inside its build
    while not (flags / "killed-is-inside").exists():
        time.sleep(0.02)
    (flags / f"ready-{os.getpid()}").touch()
cache = sr_cache.DecodedSRCache(photos, scale=2, cache_dir=cache_dir)
print(int(cache.rebuilt), len(cache))
"""


def _spawn(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(
        [sys.executable, "-c", BUILDER, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_concurrent_builders_with_one_killed_publish_one_whole_cache(tmp_path):
    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    for i in range(5):
        smooth = rng.integers(0, 256, (12, 16, 3)).astype(np.uint8)
        Image.fromarray(smooth).resize((160, 120), Image.Resampling.BICUBIC).save(photos / f"{i}.png")
    shared = tmp_path / "shared"
    shared.mkdir()
    cache_dir = shared / "cache"
    killed = _spawn(str(photos), str(cache_dir), "killed")
    builders = [_spawn(str(photos), str(cache_dir), "builder") for _ in range(2)]  # all three start at once
    deadline = time.monotonic() + 120
    while len(list(shared.glob("ready-*"))) < len(builders):
        assert killed.poll() is None and time.monotonic() < deadline, killed.communicate()[1][-2000:]
        time.sleep(0.05)
    time.sleep(0.3)  # they find no cache and queue on the lock held by the stalled build
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    results = []
    for process in builders:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err[-2000:]
        results.append(out.split())
    assert sorted(r[0] for r in results) == ["0", "1"] and {r[1] for r in results} == {"5"}  # one built, one reused
    single = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "single")
    assert all(single.image(i)[1].float().std() > 5 for i in range(5))  # real pixels, not zeros
    for name in ("hr.u8", "lr.u8", "meta.json"):  # byte-identical to a build by a single process
        assert (cache_dir / single.cache_folder.name / name).read_bytes() == (single.cache_folder / name).read_bytes()
    folder = single.cache_folder.name
    assert sorted(p.name for p in cache_dir.iterdir()) == [folder, f"{folder}.lock"]  # the killed build's staging went


# --- special sources, lying metadata, image sets sharing one cache_dir, images smaller than the scale --------------


def _small_set(folder: Path, seed: int, sizes=((48, 64), (64, 48), (40, 40))) -> Path:
    folder.mkdir()
    rng = np.random.default_rng(seed)
    for i, (h, w) in enumerate(sizes):
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    return folder


@pytest.mark.timeout(60)
@pytest.mark.parametrize("on_disk", [False, True])
def test_a_link_to_dev_zero_among_the_sources_is_refused(tmp_path, on_disk):
    photos = _small_set(tmp_path / "photos", 0)
    (photos / "9.png").symlink_to("/dev/zero")
    with pytest.raises(BadImageError, match="9.png: is a character device, not an image file"):
        DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache" if on_disk else None)


def test_a_meta_file_that_lies_about_shapes_is_detected(tmp_path):
    photos = _small_set(tmp_path / "photos", 0, sizes=((64, 80), (80, 64)))
    first = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    reference = [t.clone() for t in first.image(0)]
    meta_path = first.cache_folder / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["shapes"] = [[w, h] for h, w in meta["shapes"]]  # same byte totals, each image turned: 64x80 as 80x64
    meta_path.write_text(json.dumps(meta))
    with pytest.warns(UserWarning, match="meta.json lists image sizes that differ from the images' own headers"):
        again = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
    assert again.rebuilt and [tuple(t.shape) for t in again.image(0)] == [tuple(t.shape) for t in reference]
    assert all(torch.equal(a, b) for a, b in zip(again.image(0), reference))


def test_two_image_sets_sharing_a_cache_dir_keep_their_own_stores(tmp_path):
    a, b = _small_set(tmp_path / "a", 1), _small_set(tmp_path / "b", 2)
    in_memory = {name: DecodedSRCache(folder, scale=2).image(2)[1] for name, folder in (("a", a), ("b", b))}
    first_a, first_b = (DecodedSRCache(f, scale=2, cache_dir=tmp_path / "cache") for f in (a, b))
    assert first_a.cache_folder != first_b.cache_folder
    again_a = DecodedSRCache(a, scale=2, cache_dir=tmp_path / "cache")
    assert not again_a.rebuilt and torch.equal(again_a.image(2)[1], in_memory["a"])
    assert torch.equal(DecodedSRCache(b, scale=2, cache_dir=tmp_path / "cache").image(2)[1], in_memory["b"])


OPENER = """
import sys, torch
from helpers.sr_cache import DecodedSRCache
photos, cache_dir, expected = sys.argv[1], sys.argv[2], torch.load(sys.argv[3])
wrong = sum(not torch.equal(DecodedSRCache(photos, scale=2, cache_dir=cache_dir).image(1)[1], expected)
            for _ in range(8))
print(wrong)
"""


def test_processes_opening_two_image_sets_in_one_cache_dir_never_get_the_other_set(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    processes = []
    for name, seed in (("a", 1), ("b", 2), ("a2", 1), ("b2", 2)):  # same pixels as a/b, in other folders
        folder = _small_set(tmp_path / name, seed)
        torch.save(DecodedSRCache(folder, scale=2).image(1)[1].clone(), tmp_path / f"{name}.pt")
        processes.append(
            subprocess.Popen(
                [sys.executable, "-c", OPENER, str(folder), str(tmp_path / "cache"), str(tmp_path / f"{name}.pt")],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0 and out.strip() == "0", err[-2000:]
    assert len(list((tmp_path / "cache").glob("x2-*.lock"))) == 4  # four sets (paths differ), four folders


def test_an_image_smaller_than_the_scale_is_named(tmp_path):
    photos = _small_set(tmp_path / "photos", 0, sizes=((48, 64), (3, 40)))
    with pytest.raises(ImageTooSmallError, match=r"1.png: image is 40x3 pixels, smaller than the x4 scale"):
        DecodedSRCache(photos, scale=4)


def _images(folder: Path, count: int = 2) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        Image.fromarray(np.random.default_rng(i).integers(0, 256, (32, 40, 3), dtype=np.uint8)).save(
            folder / f"{i}.png"
        )
        paths.append(folder / f"{i}.png")
    return paths


class TestStoreFilesAndFingerprint:
    """The SR cache's files: the stores are mapped from the descriptor that was checked to be a regular file (a FIFO put
    at hr.u8 after its check is named, never opened blocking), and the content fingerprint reads each image a MiB at a
    time (a photograph with a gigabyte appended costs no gigabyte of memory), with the same key as before, so existing
    caches are kept."""

    def test_a_fifo_put_at_a_store_after_its_check_is_named_not_opened(self, tmp_path, monkeypatch):
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

    def test_the_fingerprint_streams_each_image_and_keeps_its_key(self, tmp_path):
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


def _cache(tmp_path, sizes) -> DecodedSRCache:
    folder = tmp_path / "small"
    folder.mkdir()
    rng = np.random.default_rng(1)
    for i, (width, height) in enumerate(sizes):
        Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(folder / f"s{i}.png")
    return DecodedSRCache(folder, scale=2)


class TestStoreSizesAndCropLoader:
    """The on-disk decoded cache checks each store's exact size (a store longer than its metadata says is damaged too,
    and is rebuilt with a message); CachedCropLoader's seed decides its crops, its epoch ends with the short last batch,
    and a crop wider than an image is refused naming the image."""

    @pytest.mark.parametrize("store", ["hr.u8", "lr.u8"])
    def test_a_store_longer_than_its_metadata_is_rebuilt(self, tmp_path, store):
        photos = tmp_path / "photos"
        photos.mkdir()
        rng = np.random.default_rng(0)
        for i in range(2):
            Image.fromarray(rng.integers(0, 256, (22, 26, 3), dtype=np.uint8)).save(photos / f"p{i}.png")
        cache = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
        lr, hr = (t.clone() for t in cache.image(1))
        path = cache.cache_folder / store
        size = path.stat().st_size
        del cache
        with open(path, "ab") as f:
            f.write(b"\0" * 64)
        with pytest.warns(UserWarning, match=rf"{store} holds {size + 64} bytes, {size} expected.*rebuilding"):
            again = DecodedSRCache(photos, scale=2, cache_dir=tmp_path / "cache")
        assert again.rebuilt and path.stat().st_size == size
        assert torch.equal(again.image(1)[0], lr) and torch.equal(again.image(1)[1], hr)

    def test_the_cached_loaders_seed_decides_its_crops_and_its_epoch_ends_short(self, tmp_path):
        cache = _cache(tmp_path, [(24, 20)] * 6)

        def batches(seed: int) -> list[torch.Tensor]:
            return [hr for _, hr in CachedCropLoader(cache, batch_size=4, hr_crop=8, seed=seed, as_float=False)]

        first = batches(0)
        assert [len(hr) for hr in first] == [4, 2]  # 6 images: a full batch, then the short last one
        assert all(torch.equal(a, b) for a, b in zip(first, batches(0)))
        assert not all(torch.equal(a, b) for a, b in zip(first, batches(1)))

    def test_a_crop_wider_than_an_image_names_it(self, tmp_path):
        cache = _cache(tmp_path, [(40, 60), (12, 60)])  # the second is tall enough, not wide enough
        with pytest.raises(ImageTooSmallError, match=r"s1.png: image is 12x60 pixels, smaller than the 16x16 crop"):
            cache.sample(2, hr_crop=16, generator=torch.Generator().manual_seed(0))

    def test_the_device_loaders_y_channel_is_pils_y_of_its_rgb_crop(self, tmp_path):
        from helpers.sr_cache import DeviceSRCropLoader

        cache = _cache(tmp_path, [(24, 20)] * 3)
        common = dict(batch_size=3, hr_crop=8, batches_per_epoch=1, seed=0, augment=False)
        ((_, rgb),) = list(DeviceSRCropLoader(cache, **common))
        ((lr, y),) = list(DeviceSRCropLoader(cache, channels="y", **common))
        assert y.shape == (3, 1, 8, 8) and lr.shape == (3, 1, 4, 4)
        for crop, luma in zip(rgb, y):
            pixels = (crop * 255).round().to(torch.uint8).permute(1, 2, 0).numpy()
            expected = np.array(Image.fromarray(pixels).convert("YCbCr").getchannel(0))
            assert torch.equal((luma[0] * 255).round().to(torch.uint8), torch.from_numpy(expected))

    def test_the_device_loaders_seed_decides_its_crops(self, tmp_path):
        from helpers.sr_cache import DeviceSRCropLoader

        cache = _cache(tmp_path, [(64, 48), (80, 64)])

        def crops(seed):
            loader = DeviceSRCropLoader(cache, batch_size=4, hr_crop=16, batches_per_epoch=2, seed=seed)
            return torch.cat([hr for _, hr in loader])

        assert torch.equal(crops(1), crops(1)) and not torch.equal(crops(1), crops(2))
