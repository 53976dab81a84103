"""Read-only and full data folders, on real mounts in a private mount namespace (root and unshare on Linux; skipped
elsewhere): a verified download, an extracted archive, a shard set and a resized store already in a read-only folder
are used as they are; what must be written there is a DestinationError naming the folder and what to do; a full disk
in extract_into and write_shards names the destination, and the set that was there stays usable; safe_extract
straight into a full or read-only folder names that folder too."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers.archives import extract_into
from helpers.resized_store import build_resized_store
from helpers.shards import write_shards

from .conftest import tar_bytes

ROOT = Path(__file__).resolve().parents[1]


def _in_namespace(mount: str, code: str, *args: str) -> subprocess.CompletedProcess:
    """Run `code` in a Python inside a private mount namespace, after the shell commands `mount`."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "--mount", "sh", "-c", "true"], capture_output=True).returncode:
        pytest.skip("cannot make a private mount namespace here (needs root and unshare)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    script = f'{mount} && exec "$0" -c "$@"'  # $0: python; $@: the code, then its arguments
    command = [unshare, "--mount", "sh", "-c", script, sys.executable, code, *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def _photos(folder: Path, count: int, size: tuple[int, int] = (16, 12)) -> list[tuple[str, int]]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(count)
    samples = []
    for i in range(count):
        path = folder / f"p{i:03d}.png"
        Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(path)
        samples.append((str(path), i % 2))
    return samples


READ_ONLY = """
import json, sys
from pathlib import Path
from helpers.archives import extract_into
from helpers.atomic import DestinationError
from helpers.download import download
from helpers.resized_store import ResizedStore, build_resized_store
from helpers.shards import write_shards
folder, digest = Path(sys.argv[1]), sys.argv[2]
samples = json.loads((folder / "samples.json").read_text())
said = {}
said["download"] = str(download("http://127.0.0.1:9/f", folder / "f.bin", sha256=digest, progress=False))
said["extract"] = str(extract_into(folder / "a.tar", folder, "top", verify=lambda p: None))
said["shards"] = len(write_shards(samples, folder / "shards", per_shard=2))
said["store"] = len(ResizedStore(build_resized_store(samples, folder / "store", short_side=8)))
for name, work in [
    ("download-new", lambda: download("http://127.0.0.1:9/f", folder / "g.bin", sha256=digest, progress=False)),
    ("shards-new", lambda: write_shards(samples, folder / "new-shards")),
]:
    try:
        work()
        said[name] = "no error"
    except DestinationError as error:
        said[name] = str(error)
print(json.dumps(said))
"""


def test_data_in_a_read_only_folder_is_used_and_writing_there_names_the_folder(tmp_path):
    folder = tmp_path / "ro"
    samples = _photos(folder / "photos", 4)
    (folder / "samples.json").write_text(json.dumps(samples))
    (folder / "f.bin").write_bytes(b"verified bytes")
    (folder / "a.tar").write_bytes(tar_bytes({"top/a.txt": b"1"}, mode="w"))
    extract_into(folder / "a.tar", folder, "top", verify=lambda p: None)
    write_shards(samples, folder / "shards", per_shard=2)
    build_resized_store(samples, folder / "store", short_side=8)
    for lock in folder.glob("*.lock"):
        lock.unlink()  # as a copy of the finished data would arrive: no locks
    digest = hashlib.sha256(b"verified bytes").hexdigest()
    result = _in_namespace(
        f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}", READ_ONLY, str(folder), digest
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    said = json.loads(result.stdout.strip().splitlines()[-1])
    assert said["download"] == str(folder / "f.bin") and said["extract"] == str(folder / "top")
    assert said["shards"] == 2 and said["store"] == 4
    for name, target in (("download-new", "g.bin.lock"), ("shards-new", "new-shards.lock")):
        assert f"{folder / target}: cannot write" in said[name] and "Read-only file system" in said[name], said[name]
        assert f"{folder} cannot be written: make it writable, or choose a writable folder" in said[name]


FULL = """
import json, sys
from pathlib import Path
from helpers.archives import extract_into
from helpers.atomic import DestinationError
from helpers.shards import shard_paths, write_shards
small, archive = Path(sys.argv[1]), Path(sys.argv[2])
samples, big = (json.loads(Path(sys.argv[3]).read_text()), json.loads(Path(sys.argv[4]).read_text()))
said = {"before": [str(p) for p in write_shards(samples, small / "shards", per_shard=2)]}
for name, work in [
    ("extract", lambda: extract_into(archive, small, "top")),
    ("shards", lambda: write_shards(big, small / "shards", per_shard=2)),
]:
    try:
        work()
        said[name] = "no error"
    except DestinationError as error:
        said[name] = str(error)
said["after"] = [str(p) for p in shard_paths(small / "shards")]
said["left"] = sorted(p.name for p in small.iterdir())
print(json.dumps(said))
"""


def test_a_full_disk_names_the_destination_and_keeps_the_set_that_was_there(tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    few, many = _photos(tmp_path / "few", 4), _photos(tmp_path / "many", 24, (256, 192))  # ~150 KiB each
    (tmp_path / "few.json").write_text(json.dumps(few))
    (tmp_path / "many.json").write_text(json.dumps(few + many))  # other sources: the set is written again
    rng = np.random.default_rng(0)
    (tmp_path / "a.tar").write_bytes(tar_bytes({f"top/{i}.bin": rng.bytes(1 << 20) for i in range(3)}, mode="w"))
    args = [str(small), str(tmp_path / "a.tar"), str(tmp_path / "few.json"), str(tmp_path / "many.json")]
    result = _in_namespace(f"mount -t tmpfs -o size=1m tmpfs {small}", FULL, *args)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    said = json.loads(result.stdout.strip().splitlines()[-1])
    for name, target in (("extract", "top"), ("shards", "shards")):
        assert f"{small / target}: cannot write" in said[name], said[name]
        assert "No space left on device" in said[name] and "free space on that disk" in said[name], said[name]
    assert said["after"] == said["before"]  # the set that was there is whole and readable
    assert said["left"] == ["shards", "shards.lock", "top.lock"]  # no staging, no partial folder


SAFE_EXTRACT = """
import json, sys
from pathlib import Path
from helpers.archives import safe_extract
from helpers.atomic import DestinationError
archive, small, ro = (Path(arg) for arg in sys.argv[1:4])
said = {}
for name, dest in (("full", small / "out"), ("read-only", ro / "out")):
    try:
        safe_extract(archive, dest)
        said[name] = "no error"
    except DestinationError as error:
        said[name] = str(error)
print(json.dumps(said))
"""


def test_safe_extract_into_a_full_or_read_only_folder_names_the_destination(tmp_path):
    small, ro = tmp_path / "small", tmp_path / "ro"
    small.mkdir()
    ro.mkdir()
    rng = np.random.default_rng(0)
    (tmp_path / "a.tar").write_bytes(tar_bytes({f"top/{i}.bin": rng.bytes(1 << 20) for i in range(3)}, mode="w"))
    mounts = f"mount -t tmpfs -o size=1m tmpfs {small} && mount --bind {ro} {ro} && mount -o remount,bind,ro {ro}"
    result = _in_namespace(mounts, SAFE_EXTRACT, str(tmp_path / "a.tar"), str(small), str(ro))
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    said = json.loads(result.stdout.strip().splitlines()[-1])
    assert f"{small / 'out'}: cannot write the members of a.tar" in said["full"], said["full"]
    assert "No space left on device" in said["full"] and "free space on that disk" in said["full"], said["full"]
    assert f"{ro / 'out'}: cannot write the members of a.tar" in said["read-only"], said["read-only"]
    assert f"{ro} cannot be written: make it writable" in said["read-only"], said["read-only"]
