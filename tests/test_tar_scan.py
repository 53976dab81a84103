"""Crafted archives that Python's tarfile trusts: negative sizes, huge long-name and pax headers, malformed pax
records, a bad gzip CRC, a damaged .tar.xz, a tar cut at a member boundary, a garbage header, a FIFO for an archive;
each ends in a clear error before anything is written, and extract_into publishes nothing (verify=None included)."""

from __future__ import annotations

import gzip
import io
import lzma
import os
import tarfile
import threading

import numpy as np
import pytest

from helpers.archives import extract_into, safe_extract
from helpers.safe_open import NotRegularFileError
from helpers.tar_scan import META_HEADER_BYTES, BadArchiveError, UnsafeArchiveError

from .conftest import tar_bytes


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


def _within(seconds: float, work):
    """Run `work` in a thread; fail (instead of hanging the suite) when it has not returned in `seconds`."""
    outcome: list = []

    def run():
        try:
            outcome.append(("ok", work()))
        except BaseException as error:  # noqa: BLE001 (handed to the test)
            outcome.append(("error", error))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still blocked after {seconds} s"
    if outcome[0][0] == "error":
        raise outcome[0][1]
    return outcome[0][1]


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
