"""Shards of another tool may be crafted, and a manifest may be damaged: a shard's headers are checked before
tarfile acts on them (a huge long-name header, a GNU sparse map, negative sizes, endless extended headers are a
ShardError naming the shard, within a few MiB), compressed shards are read, a sample with a member twice or a shard
with no sample names is named, a manifest whose entries are not names and sizes is a ShardError (never a
TypeError), and a source whose extension is `cls` is refused instead of losing its bytes under the label."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers.shards import ShardError, sample_label, shard_dataset, shard_paths, write_shards

from .test_tar_scan import END, _header, _member, _octal, _pax


def _read(shards: list[Path]) -> list[tuple[str, int]]:
    return [s for s in shard_dataset(shards, lambda s: (s["__key__"], sample_label(s)), shuffle_buffer=0)]


def _refused_within(work, mib: float) -> ShardError:
    """The ShardError `work` raises, checked to have been raised with under `mib` MiB allocated at the peak."""
    tracemalloc.start()
    try:
        with pytest.raises(ShardError) as info:
            work()
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    assert peak < mib, f"{peak:.0f} MiB allocated before the refusal"
    return info.value


def test_a_huge_long_name_header_is_refused_before_tarfile_reads_it(tmp_path):
    shard = tmp_path / "long-000000.tar"
    size = 100 << 20
    with open(shard, "wb") as f:  # a sparse file on disk: 100 MiB of name that tarfile would read whole
        f.write(_header("././@LongLink", _octal(size), b"L"))
        f.seek(512 + size)
        f.write(_member("000.cls", b"1") + END)
    error = _refused_within(lambda: _read([shard]), 16)
    assert "long-000000.tar: an extended header of 104857600 bytes, past the 8192" in str(error)


def test_a_gnu_sparse_map_in_a_shard_is_refused_before_tarfile_reads_it(tmp_path):
    records = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": "000.jpg",
        "GNU.sparse.realsize": "9",
    }
    sparse_map = b"%d\n" % 500_000 + b"0\n0\n" * 500_000
    sparse_map += bytes(-len(sparse_map) % 512)
    shard = tmp_path / "sparse-000000.tar"
    shard.write_bytes(_pax(records) + _header("GNUSparseFile.0/000.jpg", _octal(len(sparse_map))) + sparse_map + END)
    error = _refused_within(lambda: _read([shard]), 16)
    assert "sparse-000000.tar: a member is a GNU sparse file" in str(error)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (_header("000.jpg", b"\xff" * 12) + _member("000.cls", b"1") + END, "member '000.jpg' has a negative size"),
        (_pax({"size": "-700"}) + _member("000.jpg", b"x") + END, r"member '000.jpg' \(sample '000'\) is -700 bytes"),
        (_pax({"comment": "a"}) * 5 + _member("000.cls", b"1") + END, "more than 4 extended headers in a row"),
        (
            _member("000.jpg", b"a") + _member("000.JPG", b"b") + END,
            r"member '000.JPG' \(sample '000'\) is there twice",
        ),
        (
            _member("000.__key__", b"a") + _member("000.cls", b"1") + END,
            r"member '000.__key__' \(sample '000'\) is named as WebDataset's own",
        ),
        (_member("README", b"a") + _member("notes", b"b") + END, "holds no WebDataset samples"),
        (_member("000.cls", b"1") + bytes(512), "ends without the end-of-archive marker"),
    ],
    ids=["negative", "negative-pax", "endless-pax", "twice", "own-field", "no-samples", "one-zero-block"],
)
def test_a_crafted_or_odd_shard_is_a_shard_error_naming_it(tmp_path, body, match):
    shard = tmp_path / "odd-000000.tar"
    shard.write_bytes(body)
    with pytest.raises(ShardError, match=f"odd-000000.tar: {match}"):
        _read([shard])


def test_compressed_shards_are_read_and_a_cut_one_is_named(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for key in range(3):
            for name, data in ((f"{key:03d}.cls", str(key).encode()), (f"{key:03d}.jpg", b"x" * 100)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    whole = gzip.compress(buffer.getvalue())
    (tmp_path / "a-000000.tar.gz").write_bytes(whole)
    assert _read([tmp_path / "a-000000.tar.gz"]) == [("000", 0), ("001", 1), ("002", 2)]
    (tmp_path / "cut-000000.tar.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ShardError, match="cut-000000.tar.gz: the shard is damaged or cut short"):
        _read([tmp_path / "cut-000000.tar.gz"])


def _photos(folder: Path, count: int = 4) -> list[tuple[str, int]]:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        Image.fromarray(np.full((8, 8, 3), i * 30, np.uint8)).save(folder / f"{i}.png")
    return [(str(folder / f"{i}.png"), i) for i in range(count)]


@pytest.mark.parametrize(
    ("field", "value"),
    [("bytes", None), ("bytes", -1), ("bytes", "61440"), ("bytes", True), ("shards", 7), ("shards", "../x.tar")],
)
def test_a_damaged_manifest_entry_is_a_shard_error_and_is_written_again(tmp_path, field, value):
    samples = _photos(tmp_path / "photos")
    write_shards(samples, tmp_path / "shards", per_shard=2)
    manifest = json.loads((tmp_path / "shards" / "shards.json").read_text())
    manifest[field][0] = value
    (tmp_path / "shards" / "shards.json").write_text(json.dumps(manifest))
    with pytest.raises(ShardError, match="shards.json: not a manifest of write_shards"):
        shard_paths(tmp_path / "shards")
    with pytest.raises(ShardError, match="its shards.json cannot be read"):
        shard_dataset([tmp_path / "shards" / "shard-000000.tar"], sample_label)
    assert len(_read(write_shards(samples, tmp_path / "shards", per_shard=2))) == 4


@pytest.mark.parametrize("name", ["label.cls", "odd.__key__"])
def test_a_source_named_as_the_label_is_refused_before_anything_is_written(tmp_path, name):
    samples = _photos(tmp_path / "photos", 2)
    (tmp_path / "photos" / name).write_bytes(b"the user's bytes")
    with pytest.raises(ShardError, match=f"{name}: its extension .* so one would replace the other; rename"):
        write_shards([*samples, (str(tmp_path / "photos" / name), 1)], tmp_path / "shards")
    assert not (tmp_path / "shards").exists()
