"""Crafted archives that Python's tarfile trusts: negative sizes, huge long-name and pax headers, malformed pax
records, a bad gzip CRC, a damaged .tar.xz, a tar cut at a member boundary, a garbage header, a FIFO for an archive;
each ends in a clear error before anything is written, and extract_into publishes nothing (verify=None included)."""

from __future__ import annotations

import gzip
import io
import lzma
import os
import tarfile

import numpy as np
import pytest

from helpers import archives
from helpers.archives import extract_into, safe_extract
from helpers.safe_open import NotRegularFileError
from helpers.tar_scan import (
    BLOCK,
    META_HEADER_BYTES,
    NAME_MAX,
    TRAILING_BYTES,
    BadArchiveError,
    ExtractLimits,
    UnsafeArchiveError,
    scan_tar,
)

from .conftest import tar_bytes
from .test_safe_open import _within


def _header(name: str, size_field: bytes, kind: bytes = b"0") -> bytes:
    """A raw ustar header with a correct checksum, whatever its size field says."""
    header = bytearray(512)
    header[: len(name)] = name.encode()
    header[100:108], header[108:116], header[116:124] = b"0000644\0", b"0000000\0", b"0000000\0"
    header[124:136], header[136:148], header[156:157] = size_field, b"00000000000\0", kind
    header[257:265] = b"ustar\x0000"
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


def _octal(size: int) -> bytes:
    return b"%011o\0" % size


def _member(name: str, data: bytes) -> bytes:
    return _header(name, _octal(len(data))) + data + bytes(-len(data) % 512)


END = bytes(1024)


def _plain_tar(count: int = 3, size: int = 100) -> bytes:
    return tar_bytes({f"top/{i}.bin": bytes([i]) * size for i in range(count)}, mode="w")


def _refused(tmp_path, data: bytes, error: type, match: str, name: str = "crafted.tar") -> None:
    """`data` is refused by safe_extract and by extract_into(verify=None), with nothing written or published."""
    archive = tmp_path / name
    archive.write_bytes(data)
    with pytest.raises(error, match=match) as info:
        safe_extract(archive, tmp_path / "out")
    assert name in str(info.value)
    assert not (tmp_path / "out").exists()
    with pytest.raises(error, match=match):
        extract_into(archive, tmp_path / "parent", "top")
    assert sorted(p.name for p in (tmp_path / "parent").iterdir()) == ["top.lock"]  # nothing published, no leftovers


def test_a_negative_size_is_refused(tmp_path):
    data = _member("top/a.txt", b"hello") + _header("top/back.bin", b"\xff" * 12) + END
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert tar.getmembers()[1].size < 0  # what tarfile would trust
    _refused(tmp_path, data, UnsafeArchiveError, "'top/back.bin' has a negative or malformed size")


def test_a_negative_pax_size_is_refused(tmp_path):
    record = b"13 size=-512\n"
    data = _header("././@PaxHeader", _octal(len(record)), b"x") + record + bytes(512 - len(record))
    data += _member("top/a.txt", b"hello") + END
    _refused(tmp_path, data, UnsafeArchiveError, "negative or malformed size \\(-512\\)")


@pytest.mark.parametrize(("kind", "what"), [(b"x", "pax"), (b"L", "long-name")])
def test_a_huge_meta_header_is_refused_before_it_is_read(tmp_path, kind, what):
    size = 512 << 20  # announced; the archive does not even hold it: refused on the header alone
    data = _header("././@LongLink", _octal(size), kind) + b"x" * 4096 + END
    _refused(tmp_path, data, UnsafeArchiveError, f"a {what} header of {size} bytes.*past the {META_HEADER_BYTES}")


def test_a_pax_header_just_past_the_limit_is_refused_and_one_at_it_is_read(tmp_path):
    comment = "n" * (META_HEADER_BYTES - 40)  # a pax comment: tarfile ignores it, only its size matters here
    body = f" comment={comment}\n"
    record = f"{len(body) + len(str(len(body) + 4))}{body}".encode()
    assert int(record.split(b" ")[0]) == len(record) <= META_HEADER_BYTES
    ok = _header("././@PaxHeader", _octal(len(record)), b"x") + record + bytes(-len(record) % 512)
    ok += _member("top/short", b"1") + END
    archive = tmp_path / "long.tar"
    archive.write_bytes(ok)
    assert [p.name for p in safe_extract(archive, tmp_path / "out")] == ["short"]
    data = _header("././@PaxHeader", _octal(META_HEADER_BYTES + 1), b"x") + bytes(META_HEADER_BYTES + 512) + END
    (tmp_path / "again").mkdir()
    _refused(tmp_path / "again", data, UnsafeArchiveError, "pax header")


@pytest.mark.parametrize("record", [b"99 path=a\n", b"7 path\n", b"1 path=a\n", b"x path=a\n", b"0" * 275])
def test_a_malformed_pax_record_is_refused_without_a_regex(tmp_path, record):
    data = _header("././@PaxHeader", _octal(len(record)), b"x") + record + bytes(-len(record) % 512)
    _refused(tmp_path, data + _member("top/a", b"1") + END, BadArchiveError, "malformed pax header record")


def _gzip(data: bytes) -> bytearray:
    return bytearray(gzip.compress(data, mtime=0))


def test_a_gzip_with_a_bad_crc_is_refused(tmp_path):
    data = _gzip(_plain_tar())
    data[-8] ^= 0xFF  # the CRC32 in the trailer: every member decompresses, only the end of the stream tells
    _refused(tmp_path, bytes(data), BadArchiveError, "truncated or damaged.*CRC", "crc.tgz")


def test_a_damaged_tar_xz_is_refused(tmp_path):
    data = bytearray(
        lzma.compress(tar_bytes({f"top/{i}.bin": np.random.default_rng(i).bytes(20_000) for i in range(6)}, mode="w"))
    )
    data[len(data) // 2] ^= 0x55
    _refused(tmp_path, bytes(data), BadArchiveError, "truncated or damaged", "damaged.tar.xz")


@pytest.mark.parametrize("compress", [False, True])
def test_a_tar_cut_at_a_member_boundary_is_refused(tmp_path, compress):
    whole = _plain_tar(3)
    cut = whole[: 2 * 1024]  # two whole members (header + one data block each), then nothing
    with tarfile.open(fileobj=io.BytesIO(cut)) as tar:
        assert len(tar.getmembers()) == 2  # tarfile sees a shorter, fine archive
    data = bytes(_gzip(cut)) if compress else cut
    _refused(tmp_path, data, BadArchiveError, "without the end-of-archive marker", "cut.tgz")


def test_a_tar_with_one_zero_block_for_its_end_is_refused(tmp_path):
    _refused(tmp_path, _plain_tar(2)[:2048] + bytes(512), BadArchiveError, "one zero block")


def test_a_garbage_header_is_refused(tmp_path):
    data = bytearray(_plain_tar(3))
    data[1024:1536] = np.random.default_rng(0).bytes(512)  # the second member's header
    with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
        assert len(tar.getmembers()) == 1  # tarfile stops there, silently
    _refused(tmp_path, bytes(data), BadArchiveError, "garbage header at byte 1024")


def test_a_path_deeper_than_any_dataset_is_refused_not_a_recursion_error(tmp_path):
    deep = "top/" + "d/" * 1500 + "f.txt"
    _refused(tmp_path, tar_bytes({deep: b"1"}, mode="w"), UnsafeArchiveError, "1502 folders deep")


def test_a_member_named_like_the_extraction_folder_is_extracted(tmp_path):
    archive = tmp_path / "a.tar"
    archive.write_bytes(tar_bytes({"top/.unpacked/x.txt": b"1", "top/a.txt": b"2", "top/.unpacked.txt": b"3"}))
    folder = extract_into(archive, tmp_path / "parent", "top")
    assert (folder / ".unpacked" / "x.txt").read_bytes() == b"1" and (folder / "a.txt").read_bytes() == b"2"
    assert sorted(p.name for p in (tmp_path / "parent").iterdir()) == ["top", "top.lock"]


def test_a_fifo_for_an_archive_is_named_not_read_forever(tmp_path):
    fifo = tmp_path / "data.tgz"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFileError, match="data.tgz: is a FIFO"):
        _within(20, lambda: safe_extract(fifo, tmp_path / "out"))
    with pytest.raises(NotRegularFileError, match="data.tgz: is a FIFO"):
        _within(20, lambda: extract_into(fifo, tmp_path / "parent", "top"))
    assert not (tmp_path / "out").exists() and not (tmp_path / "parent" / "top").exists()


def _pax(records: dict[str, str]) -> bytes:
    body = b""
    for key, value in records.items():
        text = f" {key}={value}\n"
        length = len(text) + len(str(len(text)))
        length += len(str(length)) - len(str(len(text)))
        body += f"{length}{text}".encode()
    return _header("././@PaxHeader", _octal(len(body)), b"x") + body + bytes(-len(body) % 512)


def test_a_member_hidden_where_the_scan_sees_data_is_refused(tmp_path):
    # The header says "top/d/" (a folder to tarfile, which then reads no data), the pax path says "top/d": a scan
    # that took the next block for data would never check the member tarfile then finds there.
    hidden = _header("top/evil.txt", _octal(0))
    data = _pax({"path": "top/d"}) + _header("top/d/", _octal(512), b"\0") + hidden + END
    _refused(tmp_path, data, BadArchiveError, "tarfile reads 2 members where the raw headers describe 1")


def test_a_header_with_a_signed_checksum_is_read(tmp_path):
    header = bytearray(_header("top/café.txt", _octal(1)))  # two UTF-8 bytes over 127: signed sums differ
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(b - 256 if b > 127 else b for b in header)
    archive = tmp_path / "signed.tar"
    archive.write_bytes(bytes(header) + b"1" + bytes(511) + END)
    assert len(safe_extract(archive, tmp_path / "out")) == 1


def _sparse_map_archive(blocks: int, *, global_header: bool = False) -> bytes:
    """A GNU sparse 1.0 member whose map lists `blocks` (offset, size) pairs: tarfile parses the whole map in open()."""
    records = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "top/s", "GNU.sparse.realsize": "9"}
    sparse_map = b"%d\n" % blocks + b"0\n0\n" * blocks
    sparse_map += bytes(-len(sparse_map) % 512)
    pax = _pax(records)
    if global_header:  # the same records in a global pax header, which applies to every member after it
        pax = _header("././@PaxHeader", pax[124:136], b"g") + pax[512:]
    return pax + _header("top/GNUSparseFile.0/s", _octal(len(sparse_map))) + sparse_map + END


class TestCraftedHeaders:
    """Crafted archives: a GNU sparse map is refused by the pre-scan before tarfile reads it, and a
    negative size on a pax or long-name header, a NUL in a pax path, a name that is a file in one member and a folder in
    another, and a name part past NAME_MAX are each a named UnsafeArchiveError; a long but valid top folder extracts
    (the hidden staging and lock names beside it are shortened to fit)."""

    @pytest.mark.timeout(120)
    @pytest.mark.parametrize("global_header", [False, True])
    def test_a_gnu_sparse_map_is_refused_before_tarfile_reads_it(self, tmp_path, monkeypatch, global_header):
        # 500,000 map entries: 2 MB of tar, 2 KB of gzip; tarfile.open spends about a second and 200 MB on it (8 KB of
        # gzip: 4 s and 760 MB), so the pre-scan must refuse it before tarfile is asked to open anything.
        data = gzip.compress(_sparse_map_archive(500_000, global_header=global_header), mtime=0)
        assert len(data) < 4096

        def never(*args, **kwargs):
            raise AssertionError("tarfile.open was reached: the sparse map would be parsed before any check")

        monkeypatch.setattr(archives.tarfile, "open", never)
        _refused(tmp_path, data, UnsafeArchiveError, "describes a GNU sparse file \\(GNU.sparse.major\\)", "sparse.tgz")

    @pytest.mark.parametrize(("kind", "what"), [(b"x", "pax"), (b"L", "long-name"), (b"g", "pax")])
    def test_a_negative_size_on_a_meta_header_is_refused(self, tmp_path, kind, what):
        data = _header("././@LongLink", b"\xff" * 12, kind) + _member("top/a", b"1") + END
        _refused(tmp_path, data, UnsafeArchiveError, f"a {what} header at byte 0 has a negative size \\(-1\\)")

    def test_a_nul_in_a_pax_path_is_refused(self, tmp_path):
        data = _pax({"path": "top/a\0b"}) + _member("top/x", b"1") + END
        _refused(tmp_path, data, UnsafeArchiveError, "member 'top/a\\\\x00b' has a NUL byte in its name")

    @pytest.mark.parametrize(
        ("members", "match"),
        [
            (
                [("top/a", b"0"), ("top/a/b", b"0")],
                "'top/a/b' makes 'top/a' a folder, where another member makes it a file",
            ),
            (
                [("top/a/", b"5"), ("top/a", b"0")],
                "'top/a' makes 'top/a' a file, where another member makes it a folder",
            ),
            (
                [("top/a/b", b"0"), ("top/a", b"0")],
                "'top/a' makes 'top/a' a file, where another member makes it a folder",
            ),
        ],
    )
    def test_a_name_that_is_a_file_and_a_folder_is_refused(self, tmp_path, members, match):
        data = b"".join(_header(name, _octal(0), kind) for name, kind in members) + END
        _refused(tmp_path, data, UnsafeArchiveError, match)

    def test_a_file_replaced_by_a_later_file_of_the_same_name_is_still_extracted(self, tmp_path):
        archive = tmp_path / "twice.tar"
        archive.write_bytes(_member("top/a", b"old") + _member("top/b/c", b"1") + _member("top/a", b"new!") + END)
        safe_extract(archive, tmp_path / "out")
        assert (tmp_path / "out" / "top" / "a").read_bytes() == b"new!"

    @pytest.mark.parametrize("how", ["pax", "gnu"])
    def test_a_name_part_past_name_max_is_refused(self, tmp_path, how):
        name = "top/" + "n" * (NAME_MAX + 1)
        buffer = io.BytesIO()
        with tarfile.open(
            fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT if how == "pax" else tarfile.GNU_FORMAT
        ) as t:
            info = tarfile.TarInfo(name)
            info.size = 1
            t.addfile(info, io.BytesIO(b"1"))
        _refused(
            tmp_path, buffer.getvalue(), UnsafeArchiveError, f"has a name part of {NAME_MAX + 1} bytes, past the 255"
        )

    def test_a_name_part_of_exactly_name_max_is_extracted(self, tmp_path):
        archive = tmp_path / "long.tar"
        archive.write_bytes(tar_bytes({"top/" + "n" * NAME_MAX: b"1"}, mode="w"))
        assert [len(p.name) for p in safe_extract(archive, tmp_path / "out")] == [NAME_MAX]

    @pytest.mark.parametrize("length", [240, NAME_MAX])
    def test_a_long_valid_top_folder_extracts_and_leaves_nothing_beside_it(self, tmp_path, length):
        top = "t" * length  # the staging name beside it would be ~300 bytes: shortened, as is the lock at 255
        archive = tmp_path / "a.tgz"
        archive.write_bytes(tar_bytes({f"{top}/a.txt": b"1", f"{top}/sub/b.txt": b"2"}))
        folder = extract_into(archive, tmp_path / "parent", top)
        assert (folder / "a.txt").read_bytes() == b"1" and (folder / "sub" / "b.txt").read_bytes() == b"2"
        names = sorted(p.name for p in (tmp_path / "parent").iterdir())
        lock = f"{top}.lock" if length == 240 else f".{'t' * 131}~"  # at 255 bytes, '.lock' no longer fits: shortened
        assert len(names) == 2 and top in names and all(len(n.encode()) <= NAME_MAX for n in names)
        assert [n for n in names if n != top][0].startswith(lock)
        assert extract_into(archive, tmp_path / "parent", top) == folder  # found complete the second time


LIMITS = ExtractLimits(members=100, member_bytes=1 << 20, total_bytes=1 << 20)


def _tar(members: dict[str, bytes], **options) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", **options) as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def _names(data: bytes) -> list[str]:
    return [m.name for m in scan_tar(io.BytesIO(data), LIMITS, where="t.tar")]


class TestAgainstTarfile:
    """scan_tar against tarfile itself: a header whose checksum field is zero is garbage, a ustar name split into prefix
    and name is read whole, a member's own pax path wins over a global one, and the padding after the end marker and
    the extended headers in a row are bounded."""

    def test_a_header_with_a_zeroed_checksum_is_garbage(self):
        data = bytearray(_tar({"a.txt": b"hello"}))
        data[148:156] = b"0000000\0"
        with pytest.raises(BadArchiveError, match=r"t.tar: a garbage header at byte 0"):
            _names(bytes(data))

    def test_a_ustar_prefix_and_name_are_read_as_one_path(self):
        long_name = "folder-" + "x" * 90 + "/" + "image-" + "y" * 60 + ".png"
        data = _tar({long_name: b"pixels"}, format=tarfile.USTAR_FORMAT)
        assert data[BLOCK * 0 + 345] != 0  # the name really went into the ustar prefix field
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            assert tar.getnames() == [long_name]
        assert _names(data) == [long_name]

    def test_a_members_own_pax_path_wins_over_the_global_one(self):
        buffer = io.BytesIO()
        with tarfile.open(
            fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"path": "global.txt"}
        ) as tar:
            info = tarfile.TarInfo("plain.txt")
            info.size = 2
            info.pax_headers = {"path": "own.txt"}
            tar.addfile(info, io.BytesIO(b"hi"))
        with tarfile.open(fileobj=io.BytesIO(buffer.getvalue())) as tar:
            assert tar.getnames() == ["own.txt"]
        assert _names(buffer.getvalue()) == ["own.txt"]

    def test_more_than_the_allowed_padding_after_the_end_marker_is_refused(self):
        data = _tar({"a.txt": b"hello"})
        assert _names(data + bytes(TRAILING_BYTES - len(data) + 2 * BLOCK)) == ["a.txt"]
        with pytest.raises(
            UnsafeArchiveError, match=f"more than {TRAILING_BYTES} bytes after the end-of-archive marker"
        ):
            _names(data + bytes(TRAILING_BYTES + BLOCK))

    def test_more_than_four_extended_headers_in_a_row_are_refused(self):
        info = tarfile.TarInfo("a.txt")
        info.size, info.pax_headers = 5, {"comment": "x"}
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            tar.addfile(info, io.BytesIO(b"hello"))
        raw = buffer.getvalue()
        assert raw[156:157] == b"x"  # a pax header, then its one block of records, then the member
        pax, rest = raw[: 2 * BLOCK], raw[2 * BLOCK :]
        assert _names(pax * 4 + rest) == ["a.txt"]
        with pytest.raises(UnsafeArchiveError, match="more than 4 extended headers in a row"):
            _names(pax * 5 + rest)

    def test_default_limits_are_eight_times_the_archive_and_at_least_64_mib(self, tmp_path):
        small, big = tmp_path / "small.tar", tmp_path / "big.tar"
        small.write_bytes(bytes(BLOCK))
        with open(big, "wb") as f:
            f.truncate(10 << 20)  # sparse: only its size matters
        assert ExtractLimits.for_archive(small).total_bytes == 64 << 20
        limits = ExtractLimits.for_archive(big)
        assert limits.total_bytes == limits.member_bytes == 80 << 20 and limits.members == 10_000
