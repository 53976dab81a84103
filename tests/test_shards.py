"""WebDataset shards of an image folder: the files' own bytes and labels, written once; every rank a disjoint, equal
share of the shards each epoch (reshuffled with a seed all ranks share), every worker its own share of its rank's,
so one epoch over all ranks and workers reads each sample of the shared shards exactly once; samples shuffled
reproducibly, differently per rank."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import tarfile
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.shards import ShardError, rank_shards, sample_label, shard_dataset, shard_paths, write_shards

from .test_tar_scan import END, _header, _member, _octal, _pax


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[list[tuple[str, int]], list]:
    root = tmp_path_factory.mktemp("shards")
    samples = []
    for i in range(48):
        path = root / f"img{i:02d}.jpg"
        Image.fromarray(np.full((12, 16, 3), i * 5, np.uint8)).save(path)
        samples.append((str(path), i % 3))
    return samples, write_shards(samples, root / "shards", per_shard=4, classes=["a", "b", "c"])


def _key_and_label(sample: dict) -> tuple[str, int]:
    return sample["__key__"], sample_label(sample)


def test_shards_hold_the_files_bytes_and_labels_once(folder):
    samples, shards = folder
    assert len(shards) == 12 and shard_paths(shards[0].parent) == shards
    stamp = shards[0].stat().st_mtime_ns
    assert write_shards(samples, shards[0].parent, per_shard=4) == shards and shards[0].stat().st_mtime_ns == stamp
    read = sorted(shard_dataset(shards, lambda s: (s["__key__"], s["jpg"], sample_label(s)), shuffle_buffer=0))
    assert [key for key, _, _ in read] == [f"{i:08d}" for i in range(48)]
    for (key, data, label), (path, expected) in zip(read, samples):
        assert data == open(path, "rb").read() and label == expected


@pytest.mark.parametrize("world_size", [1, 2, 3, 5])
def test_every_rank_gets_a_disjoint_equal_share_each_epoch(world_size):
    shards = list(range(12))
    for epoch in range(3):
        shares = [rank_shards(shards, rank=r, world_size=world_size, seed=1, epoch=epoch) for r in range(world_size)]
        assert {len(share) for share in shares} == {12 // world_size}
        flat = [s for share in shares for s in share]
        assert len(set(flat)) == len(flat) == 12 // world_size * world_size
    if world_size > 1:
        assert rank_shards(shards, world_size=world_size, seed=1, epoch=0) != rank_shards(
            shards, world_size=world_size, seed=1, epoch=1
        )
    with pytest.raises(ValueError, match="shards for"):
        rank_shards(shards[:1], rank=0, world_size=2)


def test_ranks_and_workers_together_read_each_sample_once(folder):
    _, shards = folder
    seen = []
    for rank in range(2):
        dataset = shard_dataset(shards, _key_and_label, rank=rank, world_size=2, seed=4, shuffle_buffer=8)
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
        seen.append([key for key, _ in loader])
    assert not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == [f"{i:08d}" for i in range(48)]  # 12 shards split 6 and 6: all of them


def test_sample_shuffling_is_reproducible_and_differs_per_rank(folder):
    _, shards = folder

    def keys(rank: int, seed: int) -> list[str]:
        return [
            k for k, _ in shard_dataset(shards, _key_and_label, rank=rank, world_size=2, seed=seed, shuffle_buffer=8)
        ]

    assert keys(0, 4) == keys(0, 4)
    assert keys(0, 4) != sorted(keys(0, 4))  # shuffled, not in shard order
    assert keys(0, 4) != keys(0, 5)


def test_a_shard_set_is_written_again_when_a_source_changes(tmp_path):
    samples = []
    for i in range(6):
        path = tmp_path / f"img{i}.jpg"
        Image.fromarray(np.full((12, 16, 3), i * 20, np.uint8)).save(path)
        samples.append((str(path), i % 2))
    shards = write_shards(samples, tmp_path / "shards", per_shard=4)
    Image.fromarray(np.full((12, 16, 3), 255, np.uint8)).save(samples[5][0])  # same count, new bytes
    shards = write_shards(samples, tmp_path / "shards", per_shard=4)
    read = dict(shard_dataset(shards, lambda s: (s["__key__"], s["jpg"]), shuffle_buffer=0))
    assert read[f"{5:08d}"] == open(samples[5][0], "rb").read()
    data = bytearray(open(samples[4][0], "rb").read())
    data[len(data) // 2] ^= 0xFF  # edited in place: the same size, so only its modification time tells
    open(samples[4][0], "wb").write(bytes(data))
    os.utime(samples[4][0], ns=(os.stat(samples[4][0]).st_atime_ns, os.stat(samples[4][0]).st_mtime_ns + 10**9))
    shards = write_shards(samples, tmp_path / "shards", per_shard=4)
    assert dict(shard_dataset(shards, lambda s: (s["__key__"], s["jpg"]), shuffle_buffer=0))[f"{4:08d}"] == data
    relabelled = [(p, 1 - label) for p, label in samples]
    shards = write_shards(relabelled, tmp_path / "shards", per_shard=4)
    labels = dict(shard_dataset(shards, _key_and_label, shuffle_buffer=0))
    assert [labels[f"{i:08d}"] for i in range(6)] == [label for _, label in relabelled]


PER_SHARD = 4


@pytest.fixture(scope="module")
def streams_folder(tmp_path_factory) -> tuple[list[tuple[str, int]], list]:
    root = tmp_path_factory.mktemp("streams")
    samples = []
    for i in range(32):
        path = root / f"img{i:02d}.jpg"
        Image.fromarray(np.full((4, 4, 3), i * 7, np.uint8)).save(path)
        samples.append((str(path), i % 3))
    return samples, write_shards(samples, root / "shards", per_shard=PER_SHARD)


def _key(sample: dict) -> str:
    return sample["__key__"]


def _positions(shuffled: list[str], in_order: list[str]) -> list[int]:
    """Where each shuffled sample stood in the unshuffled stream: the shuffle's own pattern, whatever the shards."""
    return [in_order.index(key) for key in shuffled]


class TestStreams:
    """Shard streams: the sample shuffle differs per worker and per epoch (not only because the shards differ), a shard
    set written with another per_shard is rewritten, and a rank outside the world is refused."""

    def test_the_sample_shuffle_differs_per_epoch(self, streams_folder):
        _, shards = streams_folder
        patterns = []
        for epoch in (0, 1):
            in_order = list(shard_dataset(shards, _key, seed=2, epoch=epoch, shuffle_buffer=0))
            shuffled = list(shard_dataset(shards, _key, seed=2, epoch=epoch, shuffle_buffer=8))
            assert sorted(shuffled) == sorted(in_order)
            patterns.append(_positions(shuffled, in_order))
        assert patterns[0] != patterns[1]

    def test_the_sample_shuffle_differs_per_worker(self, streams_folder):
        _, shards = streams_folder
        urls = [str(p) for p in rank_shards(shards, seed=2)]

        def per_worker(buffer: int) -> list[list[str]]:
            dataset = shard_dataset(shards, _key, seed=2, shuffle_buffer=buffer)
            keys = list(torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2))
            worker_of = {
                str(shards[int(k) // PER_SHARD]): urls.index(str(shards[int(k) // PER_SHARD])) % 2 for k in keys
            }
            return [[k for k in keys if worker_of[str(shards[int(k) // PER_SHARD])] == w] for w in (0, 1)]

        in_order, shuffled = per_worker(0), per_worker(8)
        patterns = [_positions(shuffled[w], in_order[w]) for w in (0, 1)]
        assert len(patterns[0]) == len(patterns[1]) == 16
        assert patterns[0] != patterns[1]

    def test_a_set_written_with_another_per_shard_is_rewritten(self, streams_folder, tmp_path):
        samples, _ = streams_folder
        assert len(write_shards(samples, tmp_path / "s", per_shard=4)) == 8
        rewritten = write_shards(samples, tmp_path / "s", per_shard=16)
        assert len(rewritten) == 2
        labels = [sample_label(s) for s in shard_dataset(rewritten, lambda s: s, shuffle_buffer=0)]
        assert labels == [label for _, label in samples]

    @pytest.mark.parametrize("rank", [-1, 2])
    def test_a_rank_outside_the_world_is_refused(self, streams_folder, rank):
        _, shards = streams_folder
        with pytest.raises(ValueError, match=f"rank {rank} is outside world_size 2"):
            rank_shards(shards, rank=rank, world_size=2)


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


def _photos(folder: Path, count: int = 4) -> list[tuple[str, int]]:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        Image.fromarray(np.full((8, 8, 3), i * 30, np.uint8)).save(folder / f"{i}.png")
    return [(str(folder / f"{i}.png"), i) for i in range(count)]


class TestCraftedShardsAndManifests:
    """Shards of another tool may be crafted, and a manifest may be damaged: a shard's headers are checked before
    tarfile acts on them (a huge long-name header, a GNU sparse map, negative sizes, endless extended headers are a
    ShardError naming the shard, within a few MiB), compressed shards are read, a sample with a member twice or a shard
    with no sample names is named, a manifest whose entries are not names and sizes is a ShardError (never a
    TypeError), and a source whose extension is `cls` is refused instead of losing its bytes under the label."""

    def test_a_huge_long_name_header_is_refused_before_tarfile_reads_it(self, tmp_path):
        shard = tmp_path / "long-000000.tar"
        size = 100 << 20
        with open(shard, "wb") as f:  # a sparse file on disk: 100 MiB of name that tarfile would read whole
            f.write(_header("././@LongLink", _octal(size), b"L"))
            f.seek(512 + size)
            f.write(_member("000.cls", b"1") + END)
        error = _refused_within(lambda: _read([shard]), 16)
        assert "long-000000.tar: an extended header of 104857600 bytes, past the 8192" in str(error)

    def test_a_gnu_sparse_map_in_a_shard_is_refused_before_tarfile_reads_it(self, tmp_path):
        records = {
            "GNU.sparse.major": "1",
            "GNU.sparse.minor": "0",
            "GNU.sparse.name": "000.jpg",
            "GNU.sparse.realsize": "9",
        }
        sparse_map = b"%d\n" % 500_000 + b"0\n0\n" * 500_000
        sparse_map += bytes(-len(sparse_map) % 512)
        shard = tmp_path / "sparse-000000.tar"
        shard.write_bytes(
            _pax(records) + _header("GNUSparseFile.0/000.jpg", _octal(len(sparse_map))) + sparse_map + END
        )
        error = _refused_within(lambda: _read([shard]), 16)
        assert "sparse-000000.tar: a member is a GNU sparse file" in str(error)

    @pytest.mark.parametrize(
        ("body", "match"),
        [
            (_header("000.jpg", b"\xff" * 12) + _member("000.cls", b"1") + END, "member '000.jpg' has a negative size"),
            (
                _pax({"size": "-700"}) + _member("000.jpg", b"x") + END,
                r"member '000.jpg' \(sample '000'\) is -700 bytes",
            ),
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
    def test_a_crafted_or_odd_shard_is_a_shard_error_naming_it(self, tmp_path, body, match):
        shard = tmp_path / "odd-000000.tar"
        shard.write_bytes(body)
        with pytest.raises(ShardError, match=f"odd-000000.tar: {match}"):
            _read([shard])

    def test_compressed_shards_are_read_and_a_cut_one_is_named(self, tmp_path):
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

    @pytest.mark.parametrize(
        ("field", "value"),
        [("bytes", None), ("bytes", -1), ("bytes", "61440"), ("bytes", True), ("shards", 7), ("shards", "../x.tar")],
    )
    def test_a_damaged_manifest_entry_is_a_shard_error_and_is_written_again(self, tmp_path, field, value):
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
    def test_a_source_named_as_the_label_is_refused_before_anything_is_written(self, tmp_path, name):
        samples = _photos(tmp_path / "photos", 2)
        (tmp_path / "photos" / name).write_bytes(b"the user's bytes")
        with pytest.raises(ShardError, match=f"{name}: its extension .* so one would replace the other; rename"):
            write_shards([*samples, (str(tmp_path / "photos" / name), 1)], tmp_path / "shards")
        assert not (tmp_path / "shards").exists()


WHOLE_COUNT, WHOLE_PER_SHARD = 40, 10


def _samples(folder: Path, count: int = WHOLE_COUNT, shade: int = 0) -> list[tuple[str, int]]:
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


def _shard(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


class TestWholeShardsOnly:
    """A shard set is complete only when every shard is whole: a shard cut after its third sample, or of the recorded
    size without its end-of-archive marker, is refused by the reader and written again by write_shards, never read as
    fewer samples; a set rebuilt under a running reader (a shard replaced, or gone) is an error, never a mix of two
    builds; a missing or non-integer label and a member past the size limit are errors that name the shard and the
    key."""

    def test_a_shard_cut_after_its_third_sample_is_refused_and_written_again(self, tmp_path):
        samples = _samples(tmp_path / "photos")
        shards = write_shards(samples, tmp_path / "shards", per_shard=WHOLE_PER_SHARD)
        assert len(_keys(shards)) == WHOLE_COUNT
        _cut_after(shards[1], 3)
        with tarfile.open(shards[1]) as tar:
            assert len(tar.getmembers()) == 6  # what a reader that trusts tarfile would see: 3 of 10 samples, no word
        with pytest.raises(ShardError, match=r"shard-000001.tar holds \d+ bytes where shards.json records \d+"):
            shard_paths(tmp_path / "shards")
        with pytest.raises(ShardError, match=r"shard-000001.tar: not a whole shard"):
            shard_dataset(shards, lambda s: s)
        rewritten = write_shards(samples, tmp_path / "shards", per_shard=WHOLE_PER_SHARD)
        assert sorted(_keys(rewritten)) == [f"{i:08d}" for i in range(WHOLE_COUNT)]

    def test_a_shard_of_the_recorded_size_without_its_end_marker_is_refused_and_written_again(self, tmp_path):
        samples = _samples(tmp_path / "photos")
        shards = write_shards(samples, tmp_path / "shards", per_shard=WHOLE_PER_SHARD)
        size = shards[2].stat().st_size
        with open(shards[2], "r+b") as f:  # damaged in place: the size shards.json records, the last blocks not zeros
            f.seek(size - 1024)
            f.write(b"\xff" * 1024)
        with pytest.raises(ShardError, match="shard-000002.tar does not end with the end-of-archive marker"):
            shard_paths(tmp_path / "shards")
        rewritten = write_shards(samples, tmp_path / "shards", per_shard=WHOLE_PER_SHARD)
        assert rewritten[2].read_bytes()[-1024:] == bytes(1024)
        assert sorted(_keys(rewritten)) == [f"{i:08d}" for i in range(WHOLE_COUNT)]

    @pytest.mark.parametrize("cut", ["boundary", "inside"])
    def test_a_cut_shard_without_a_manifest_is_an_error_when_read(self, tmp_path, cut):
        shards = write_shards(_samples(tmp_path / "photos", 10), tmp_path / "shards", per_shard=WHOLE_PER_SHARD)
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

    def test_a_set_rebuilt_under_a_running_reader_is_an_error_not_a_mix(self, tmp_path):
        samples = _samples(tmp_path / "photos")
        shards = write_shards(samples, tmp_path / "shards", per_shard=WHOLE_PER_SHARD)
        stream = iter(shard_dataset(shards, lambda s: (s["__url__"], sample_label(s)), shuffle_buffer=0))
        first_url, _ = next(stream)  # the reader is inside its first shard
        relabelled = [(path, 3 - label) for path, label in samples]
        write_shards(relabelled, tmp_path / "shards", per_shard=WHOLE_PER_SHARD)  # published while the reader runs
        read = []
        with pytest.raises(ShardError, match="written again while this dataset read it"):
            for url, label in stream:
                read.append((url, label))
        assert read and all(url == first_url for url, _ in read)  # the open shard finished, from the old build only
        old = {label for _, label in samples[:WHOLE_PER_SHARD]}
        assert {label for _, label in read} <= old
        fresh = [
            sample_label(s) for s in shard_dataset(shard_paths(tmp_path / "shards"), lambda s: s, shuffle_buffer=0)
        ]
        assert sorted(fresh) == sorted(label for _, label in relabelled)  # a new dataset reads the new build whole

    def test_a_shard_gone_in_a_rebuild_under_a_running_reader_is_an_error_naming_it(self, tmp_path):
        samples = _samples(tmp_path / "photos", 2 * WHOLE_PER_SHARD)
        shards = write_shards(samples, tmp_path / "shards", per_shard=WHOLE_PER_SHARD)
        seed = next(s for s in range(100) if rank_shards(shards, seed=s)[0] == shards[0])  # shard-000001 read second
        stream = iter(shard_dataset(shards, lambda s: s["__url__"], seed=seed, shuffle_buffer=0))
        assert next(stream) == str(shards[0])
        write_shards(samples, tmp_path / "shards", per_shard=2 * WHOLE_PER_SHARD)  # one shard now: shard-000001 is gone
        assert not shards[1].exists()
        with pytest.raises(ShardError, match="shard-000001.tar: the shard set was written again while this dataset"):
            list(stream)

    @pytest.mark.parametrize(
        ("members", "match"),
        [
            ({"00000007.jpg": b"x"}, "sample '00000007' has no label"),
            (
                {"00000007.cls": b"cat", "00000007.jpg": b"x"},
                "sample '00000007' has the label 'cat', not a class index",
            ),
            ({"00000007.cls": b"-1", "00000007.jpg": b"x"}, "sample '00000007' has the label '-1'"),
        ],
    )
    def test_a_missing_or_non_integer_label_names_the_shard_and_key(self, tmp_path, members, match):
        shard = _shard(tmp_path / "odd.tar", members)
        with pytest.raises(ShardError, match=f"odd.tar: {match}"):
            list(shard_dataset([shard], sample_label, shuffle_buffer=0))

    def test_a_member_past_the_size_limit_names_the_shard_and_key_before_it_is_read(self, tmp_path):
        shard = _shard(tmp_path / "big.tar", {"00000003.cls": b"1", "00000003.jpg": bytes(4096)})
        assert len(_keys([shard], member_bytes=4096)) == 1
        with pytest.raises(
            ShardError, match=r"big.tar: member '00000003.jpg' \(sample '00000003'\) is 4096 bytes, past"
        ):
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

    def test_a_source_past_the_size_limit_is_named_and_no_set_is_left(self, tmp_path):
        samples = _samples(tmp_path / "photos", 4)
        big = tmp_path / "photos" / "huge.jpg"
        big.write_bytes(bytes(5000))
        with pytest.raises(ShardError, match=r"huge.jpg: 5000 bytes, past the 4096-byte limit"):
            write_shards([*samples, (str(big), 0)], tmp_path / "shards", per_shard=2, member_bytes=4096)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["photos", "shards.lock"]
