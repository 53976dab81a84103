"""A shard set is complete only when every shard is whole: a shard cut after its third sample, or of the recorded
size without its end-of-archive marker, is refused by the reader and written again by write_shards, never read as
fewer samples; a set rebuilt under a running reader (a shard replaced, or gone) is an error, never a mix of two
builds; a missing or non-integer label and a member past the size limit are errors that name the shard and the
key."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers.shards import ShardError, rank_shards, sample_label, shard_dataset, shard_paths, write_shards

COUNT, PER_SHARD = 40, 10


def _samples(folder: Path, count: int = COUNT, shade: int = 0) -> list[tuple[str, int]]:
    folder.mkdir(exist_ok=True)
    samples = []
    for i in range(count):
        path = folder / f"img{i:02d}.jpg"
        Image.fromarray(np.full((6, 8, 3), (i * 5 + shade) % 256, np.uint8)).save(path)
        samples.append((str(path), i % 4))
    return samples


def _keys(shards, **options) -> list[str]:
    return [sample["__key__"] for sample in shard_dataset(shards, lambda s: s, shuffle_buffer=0, **options)]


def _cut_after(shard: Path, samples: int) -> None:
    """Cut a shard at the member boundary after its first `samples` samples (two members each: .cls and .jpg)."""
    with tarfile.open(shard) as tar:
        members = tar.getmembers()[: 2 * samples]
    last = members[-1]
    os.truncate(shard, last.offset_data + -(-last.size // 512) * 512)


def test_a_shard_cut_after_its_third_sample_is_refused_and_written_again(tmp_path):
    samples = _samples(tmp_path / "photos")
    shards = write_shards(samples, tmp_path / "shards", per_shard=PER_SHARD)
    assert len(_keys(shards)) == COUNT
    _cut_after(shards[1], 3)
    with tarfile.open(shards[1]) as tar:
        assert len(tar.getmembers()) == 6  # what a reader that trusts tarfile would see: 3 of 10 samples, no word
    with pytest.raises(ShardError, match=r"shard-000001.tar holds \d+ bytes where shards.json records \d+"):
        shard_paths(tmp_path / "shards")
    with pytest.raises(ShardError, match=r"shard-000001.tar: not a whole shard"):
        shard_dataset(shards, lambda s: s)
    rewritten = write_shards(samples, tmp_path / "shards", per_shard=PER_SHARD)
    assert sorted(_keys(rewritten)) == [f"{i:08d}" for i in range(COUNT)]


def test_a_shard_of_the_recorded_size_without_its_end_marker_is_refused_and_written_again(tmp_path):
    samples = _samples(tmp_path / "photos")
    shards = write_shards(samples, tmp_path / "shards", per_shard=PER_SHARD)
    size = shards[2].stat().st_size
    with open(shards[2], "r+b") as f:  # damaged in place: the size shards.json records, the last blocks not zeros
        f.seek(size - 1024)
        f.write(b"\xff" * 1024)
    with pytest.raises(ShardError, match="shard-000002.tar does not end with the end-of-archive marker"):
        shard_paths(tmp_path / "shards")
    rewritten = write_shards(samples, tmp_path / "shards", per_shard=PER_SHARD)
    assert rewritten[2].read_bytes()[-1024:] == bytes(1024)
    assert sorted(_keys(rewritten)) == [f"{i:08d}" for i in range(COUNT)]


@pytest.mark.parametrize("cut", ["boundary", "inside"])
def test_a_cut_shard_without_a_manifest_is_an_error_when_read(tmp_path, cut):
    shards = write_shards(_samples(tmp_path / "photos", 10), tmp_path / "shards", per_shard=PER_SHARD)
    lone = tmp_path / "elsewhere" / "lone.tar"  # copied away from its manifest: only the stream can tell
    lone.parent.mkdir()
    shutil.copy(shards[0], lone)
    _cut_after(lone, 3)
    if cut == "inside":
        os.truncate(lone, lone.stat().st_size + 300)  # and a fourth sample's header with part of its data
        with open(lone, "r+b") as f, open(shards[0], "rb") as whole:
            f.seek(lone.stat().st_size - 300)
            whole.seek(lone.stat().st_size - 300)
            f.write(whole.read(300))
    with pytest.raises(ShardError, match="lone.tar: (ends without the end-of-archive marker|the shard is damaged)"):
        _keys([lone])


def test_a_set_rebuilt_under_a_running_reader_is_an_error_not_a_mix(tmp_path):
    samples = _samples(tmp_path / "photos")
    shards = write_shards(samples, tmp_path / "shards", per_shard=PER_SHARD)
    stream = iter(shard_dataset(shards, lambda s: (s["__url__"], sample_label(s)), shuffle_buffer=0))
    first_url, _ = next(stream)  # the reader is inside its first shard
    relabelled = [(path, 3 - label) for path, label in samples]
    write_shards(relabelled, tmp_path / "shards", per_shard=PER_SHARD)  # published while the reader runs
    read = []
    with pytest.raises(ShardError, match="written again while this dataset read it"):
        for url, label in stream:
            read.append((url, label))
    assert read and all(url == first_url for url, _ in read)  # the open shard finished, from the old build only
    old = {label for _, label in samples[:PER_SHARD]}
    assert {label for _, label in read} <= old
    fresh = [sample_label(s) for s in shard_dataset(shard_paths(tmp_path / "shards"), lambda s: s, shuffle_buffer=0)]
    assert sorted(fresh) == sorted(label for _, label in relabelled)  # a new dataset reads the new build whole


def test_a_shard_gone_in_a_rebuild_under_a_running_reader_is_an_error_naming_it(tmp_path):
    samples = _samples(tmp_path / "photos", 2 * PER_SHARD)
    shards = write_shards(samples, tmp_path / "shards", per_shard=PER_SHARD)
    seed = next(s for s in range(100) if rank_shards(shards, seed=s)[0] == shards[0])  # shard-000001 read second
    stream = iter(shard_dataset(shards, lambda s: s["__url__"], seed=seed, shuffle_buffer=0))
    assert next(stream) == str(shards[0])
    write_shards(samples, tmp_path / "shards", per_shard=2 * PER_SHARD)  # one shard now: shard-000001 is gone
    assert not shards[1].exists()
    with pytest.raises(ShardError, match="shard-000001.tar: the shard set was written again while this dataset"):
        list(stream)


def _shard(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize(
    ("members", "match"),
    [
        ({"00000007.jpg": b"x"}, "sample '00000007' has no label"),
        ({"00000007.cls": b"cat", "00000007.jpg": b"x"}, "sample '00000007' has the label 'cat', not a class index"),
        ({"00000007.cls": b"-1", "00000007.jpg": b"x"}, "sample '00000007' has the label '-1'"),
    ],
)
def test_a_missing_or_non_integer_label_names_the_shard_and_key(tmp_path, members, match):
    shard = _shard(tmp_path / "odd.tar", members)
    with pytest.raises(ShardError, match=f"odd.tar: {match}"):
        list(shard_dataset([shard], sample_label, shuffle_buffer=0))


def test_a_member_past_the_size_limit_names_the_shard_and_key_before_it_is_read(tmp_path):
    shard = _shard(tmp_path / "big.tar", {"00000003.cls": b"1", "00000003.jpg": bytes(4096)})
    assert len(_keys([shard], member_bytes=4096)) == 1
    with pytest.raises(ShardError, match=r"big.tar: member '00000003.jpg' \(sample '00000003'\) is 4096 bytes, past"):
        _keys([shard], member_bytes=4095)
    crafted = bytearray(shard.read_bytes())  # the same member announcing 4 GiB: refused on its header alone
    header = 1024
    assert crafted[header : header + 12] == b"00000003.jpg"
    crafted[header + 124 : header + 136] = b"%011o\0" % (4 << 30)
    crafted[header + 148 : header + 156] = b" " * 8
    crafted[header + 148 : header + 156] = b"%06o\0 " % sum(crafted[header : header + 512])
    (tmp_path / "crafted.tar").write_bytes(bytes(crafted))
    with pytest.raises(ShardError, match=r"crafted.tar: member '00000003.jpg' \(sample '00000003'\) is 4294967296"):
        _keys([tmp_path / "crafted.tar"])


def test_a_source_past_the_size_limit_is_named_and_no_set_is_left(tmp_path):
    samples = _samples(tmp_path / "photos", 4)
    big = tmp_path / "photos" / "huge.jpg"
    big.write_bytes(bytes(5000))
    with pytest.raises(ShardError, match=r"huge.jpg: 5000 bytes, past the 4096-byte limit"):
        write_shards([*samples, (str(big), 0)], tmp_path / "shards", per_shard=2, member_bytes=4096)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photos", "shards.lock"]
