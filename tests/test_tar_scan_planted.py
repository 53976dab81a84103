"""scan_tar against tarfile itself: a header whose checksum field is zero is garbage, a ustar name split into prefix
and name is read whole, a member's own pax path wins over a global one, and the padding after the end marker and
the extended headers in a row are bounded."""

from __future__ import annotations

import io
import tarfile

import pytest

from helpers.tar_scan import BLOCK, TRAILING_BYTES, BadArchiveError, ExtractLimits, UnsafeArchiveError, scan_tar

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


def test_a_header_with_a_zeroed_checksum_is_garbage():
    data = bytearray(_tar({"a.txt": b"hello"}))
    data[148:156] = b"0000000\0"
    with pytest.raises(BadArchiveError, match=r"t.tar: a garbage header at byte 0"):
        _names(bytes(data))


def test_a_ustar_prefix_and_name_are_read_as_one_path():
    long_name = "folder-" + "x" * 90 + "/" + "image-" + "y" * 60 + ".png"
    data = _tar({long_name: b"pixels"}, format=tarfile.USTAR_FORMAT)
    assert data[BLOCK * 0 + 345] != 0  # the name really went into the ustar prefix field
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert tar.getnames() == [long_name]
    assert _names(data) == [long_name]


def test_a_members_own_pax_path_wins_over_the_global_one():
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"path": "global.txt"}) as tar:
        info = tarfile.TarInfo("plain.txt")
        info.size = 2
        info.pax_headers = {"path": "own.txt"}
        tar.addfile(info, io.BytesIO(b"hi"))
    with tarfile.open(fileobj=io.BytesIO(buffer.getvalue())) as tar:
        assert tar.getnames() == ["own.txt"]
    assert _names(buffer.getvalue()) == ["own.txt"]


def test_more_than_the_allowed_padding_after_the_end_marker_is_refused():
    data = _tar({"a.txt": b"hello"})
    assert _names(data + bytes(TRAILING_BYTES - len(data) + 2 * BLOCK)) == ["a.txt"]
    with pytest.raises(UnsafeArchiveError, match=f"more than {TRAILING_BYTES} bytes after the end-of-archive marker"):
        _names(data + bytes(TRAILING_BYTES + BLOCK))


def test_more_than_four_extended_headers_in_a_row_are_refused():
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


def test_default_limits_are_eight_times_the_archive_and_at_least_64_mib(tmp_path):
    small, big = tmp_path / "small.tar", tmp_path / "big.tar"
    small.write_bytes(bytes(BLOCK))
    with open(big, "wb") as f:
        f.truncate(10 << 20)  # sparse: only its size matters
    assert ExtractLimits.for_archive(small).total_bytes == 64 << 20
    limits = ExtractLimits.for_archive(big)
    assert limits.total_bytes == limits.member_bytes == 80 << 20 and limits.members == 10_000
