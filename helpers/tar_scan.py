"""What a file is (gzip, xz, tar, an HTML page ...) and a pre-scan of a tar archive's raw headers before `tarfile`
trusts any of them.

`tarfile` accepts negative member sizes (and then reads backwards), reads a GNU long-name or pax header of any size
whole into memory, parses pax headers with a regular expression that is quadratic on releases without the
CVE-2024-6232 fix, stops silently at a garbage header, and never reads a compressed stream to its end (so a bad gzip
CRC, a damaged .tar.xz or a tar cut at a member boundary extract part of their members without an error).
It also reads a GNU sparse map (pax `GNU.sparse.*` records) as soon as it opens the archive, before any member can
be checked: a few KiB of compressed map cost it seconds to minutes and gigabytes. `scan_tar` reads the decompressed
stream once, to its end (the decompressor checks its CRC there), checking every header's checksum, refusing negative
sizes (of members and of long-name or pax headers), meta headers above `META_HEADER_BYTES`, GNU sparse records,
names no file system can hold (a NUL byte, a part over `NAME_MAX` bytes), modification times no file can be given
(tarfile would fail on them after writing the member, with a bare OverflowError), a missing end-of-archive marker and
archives past their `ExtractLimits`, and returns each member's (name, size, data offset) so the caller can check
that `tarfile` reads the same members. Its memory is bounded by one MiB read at a time plus the meta headers.

Example:
    >>> import io, tarfile
    >>> archive = io.BytesIO()
    >>> with tarfile.open(fileobj=archive, mode="w") as tar:
    ...     tar.addfile(tarfile.TarInfo("a.txt"), io.BytesIO())
    >>> members = scan_tar(io.BytesIO(archive.getvalue()), ExtractLimits(10, 2**20, 2**20), where="a.tar")
    >>> kind_of_head(archive.getvalue()[:512]), [(member.name, member.size) for member in members]
    ('tar', [('a.txt', 0)])

Copy alone.
Needs: the standard library only.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import math
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

BLOCK = 512
MIB = 1 << 20
META_HEADER_BYTES = 8 << 10  # a long name or pax header past this is not a dataset's (PATH_MAX is 4096)
TRAILING_BYTES = 1 << 20  # zero padding allowed after the end-of-archive marker (tar pads to its record size)
META_IN_A_ROW = 4  # e.g. a global pax header, a pax header, a long name and a long link before one member
NAME_MAX = 255  # bytes in one part of a path on Linux, macOS and Windows file systems
MTIME_LIMIT = 2.0**62  # seconds either side of 1970: past this os.utime overflows (a file system keeps far less)
SPARSE_PREFIX = "GNU.sparse."  # pax records of GNU sparse files (formats 0.0, 0.1 and 1.0)
_META_TYPES = {b"L", b"K", b"x", b"g", b"X"}  # GNU long name/link, pax, pax global, Solaris pax
_DATA_TYPES = {b"0", b"\0", b"7", b"S"}  # tarfile skips data after these (and after types it does not know)
_KNOWN_TYPES = _DATA_TYPES | _META_TYPES | {b"1", b"2", b"3", b"4", b"5", b"6"}
_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),
)
_KIND_NAMES = {
    "gzip": "a gzip-compressed file",
    "bzip2": "a bzip2-compressed file",
    "xz": "an xz-compressed file",
    "zip": "a zip archive",
    "tar": "an uncompressed tar archive",
    "html": "an HTML page (an error or login page?)",
    "empty": "an empty file",
    "unknown": "data of an unknown kind",
}


class BadArchiveError(ValueError):
    """A file is not a readable archive of the expected kind: an HTML error page, a zip, a truncated download."""


class UnsafeArchiveError(ValueError):
    """An archive holds a member that would escape the destination, is not a plain file or folder, or is too big."""


@dataclass(frozen=True)
class ExtractLimits:
    """What an archive may hold: at most `members` entries, `member_bytes` per file and `total_bytes` in all."""

    members: int
    member_bytes: int
    total_bytes: int

    @classmethod
    def for_archive(cls, archive: str | os.PathLike) -> ExtractLimits:
        """Generous limits for an archive nothing is known about: 10,000 members and 8x its size (at least 64 MiB)."""
        total = max(64 * MIB, 8 * Path(archive).stat().st_size)
        return cls(members=10_000, member_bytes=total, total_bytes=total)


@dataclass(frozen=True)
class ScannedMember:
    """One member as its raw headers describe it: name, size (after a pax `size`), where its data starts."""

    name: str
    size: int
    offset_data: int


def kind_of_head(head: bytes) -> str:
    """What a file's first 512 bytes say it is: gzip, bzip2, xz, zip, tar, html, empty or unknown."""
    if not head:
        return "empty"
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head[257:262] == b"ustar":
        return "tar"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return "html" if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<?xml")) else "unknown"


def describe_kind(kind: str) -> str:
    """A phrase for a `file_kind` result, e.g. 'an HTML page (an error or login page?)'."""
    return _KIND_NAMES.get(kind, kind)


class _Stream:
    """Exact reads from a decompressed stream, counting the offset."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.offset = stream, 0

    def read(self, size: int) -> bytes:
        chunks, left = [], size
        while left:
            chunk = self.stream.read(min(left, MIB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        self.offset += len(data)
        return data

    def skip(self, size: int) -> int:
        skipped = 0
        while skipped < size:
            got = len(self.read(min(MIB, size - skipped)))
            if not got:
                break
            skipped += got
        return skipped


def _number(field: bytes) -> int | None:
    """A tar number field as tarfile reads it (octal, or GNU base-256 where 0xff means negative); None if garbage."""
    if field[:1] in (b"\x80", b"\xff"):
        value = int.from_bytes(field[1:], "big")
        return value - 256 ** (len(field) - 1) if field[0] == 0xFF else value
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text or b"0", 8)
    except ValueError:
        return None


def _checksum_ok(header: bytes) -> bool:
    stored = _number(header[148:156])
    blanked = header[:148] + b" " * 8 + header[156:]
    if stored == sum(blanked):
        return True
    return stored == sum(blanked) - 256 * sum(b > 127 for b in blanked)  # some old tars sum signed bytes


def _pax_records(data: bytes, where: str) -> dict[str, str]:
    """Parse pax records 'LENGTH KEY=VALUE\\n' strictly and in linear time (no regular expression)."""
    records, pos = {}, 0
    while pos < len(data):
        space = data.find(b" ", pos, pos + 20)
        length = int(data[pos:space]) if space > pos and data[pos:space].isdigit() else 0
        record = data[pos : pos + length]
        if length <= space - pos + 1 or len(record) < length or not record.endswith(b"\n") or b"=" not in record:
            raise BadArchiveError(f"{where}: a malformed pax header record at byte {pos}; the archive is damaged")
        key, _, value = record[space - pos + 1 : -1].partition(b"=")
        records[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return records


def _header_name(header: bytes) -> str:
    name = header[:100].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    if header[257:263] == b"ustar\x00" and header[345:346] != b"\0":
        name = header[345:500].split(b"\0", 1)[0].decode("utf-8", "surrogateescape") + "/" + name
    return name


def _meta(stream: _Stream, kind: bytes, size: int, where: str) -> dict[str, str]:
    """Read a long-name/pax header's data (refused when negative or above META_HEADER_BYTES, before it is read)."""
    what, start = ("pax" if kind in b"xgX" else "long-name"), stream.offset - BLOCK
    if size < 0:
        raise UnsafeArchiveError(
            f"{where}: a {what} header at byte {start} has a negative size ({size}); no tar tool "
            "writes one, so the archive is crafted: refusing to extract"
        )
    if size > META_HEADER_BYTES:
        raise UnsafeArchiveError(
            f"{where}: a {what} header of {size} bytes at byte {stream.offset}, "
            f"past the {META_HEADER_BYTES}-byte limit; a dataset's names are never that long, refusing to extract"
        )
    data = stream.read(-(-size // BLOCK) * BLOCK)[:size]
    if len(data) < size:
        raise BadArchiveError(f"{where}: cut short inside a header at byte {stream.offset}; the archive is truncated")
    if kind in b"LK":
        return {"path" if kind == b"L" else "linkpath": data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")}
    records = _pax_records(data, where)
    sparse = sorted(key for key in records if key.startswith(SPARSE_PREFIX))
    if sparse:
        raise UnsafeArchiveError(
            f"{where}: the pax header at byte {start} describes a GNU sparse file "
            f"({sparse[0]}); datasets hold none, and tarfile would read its map before any check: refusing to extract"
        )
    return records


def _check_name(name: str, where: str) -> None:
    """Refuse a member name no file system can hold: a NUL byte in it, or one part longer than NAME_MAX bytes."""
    shown = repr(name[:80]) + ("..." if len(name) > 80 else "")
    if "\0" in name:
        raise UnsafeArchiveError(
            f"{where}: member {shown} has a NUL byte in its name (from a pax path); no file can be named so, "
            "refusing to extract"
        )
    longest = max(len(part.encode("utf-8", "surrogateescape")) for part in name.split("/"))
    if longest > NAME_MAX:
        raise UnsafeArchiveError(
            f"{where}: member {shown} has a name part of {longest} bytes, past the {NAME_MAX} a file system allows; "
            "refusing to extract"
        )


def _check_mtime(stamp: str | int | None, name: str, where: str) -> None:
    """Refuse a modification time no file can be given (infinite, NaN, past MTIME_LIMIT), as a pax or a raw field."""
    try:
        value = float(stamp) if stamp is not None else 0.0
    except ValueError:
        return  # tarfile reads a malformed pax time as 0
    if not (math.isfinite(value) and abs(value) < MTIME_LIMIT):
        raise UnsafeArchiveError(
            f"{where}: member {name!r} has the modification time {str(stamp)[:40]}, which no file can be given; "
            "no tar tool writes one, so the archive is crafted or damaged: refusing to extract"
        )


def _end_of_archive(stream: _Stream, where: str) -> None:
    if stream.read(BLOCK) != bytes(BLOCK):
        raise BadArchiveError(f"{where}: one zero block where the end-of-archive marker has two; truncated or damaged")
    if stream.skip(TRAILING_BYTES + 1) > TRAILING_BYTES:
        raise UnsafeArchiveError(f"{where}: more than {TRAILING_BYTES} bytes after the end-of-archive marker")


def _check_limits(members: list[ScannedMember], total: int, limits: ExtractLimits, where: str) -> None:
    last = members[-1]
    if len(members) > limits.members:
        raise UnsafeArchiveError(
            f"{where}: more than {limits.members} members; not the expected archive (pass larger limits only if you "
            "trust it)"
        )
    if last.size > limits.member_bytes or total > limits.total_bytes:
        raise UnsafeArchiveError(
            f"{where}: member {last.name!r} ({last.size} bytes) takes the archive past its limits "
            f"({limits.member_bytes} bytes a member, {limits.total_bytes} in all); not the expected archive (pass "
            "larger limits only if you trust it)"
        )


def _scan_headers(stream: _Stream, limits: ExtractLimits, where: str) -> list[ScannedMember]:
    members: list[ScannedMember] = []
    total, in_a_row = 0, 0
    pending: dict[str, str] = {}  # this member's pax records
    global_pax: dict[str, str] = {}
    while True:
        header = stream.read(BLOCK)
        if len(header) < BLOCK:
            raise BadArchiveError(
                f"{where}: ends at byte {stream.offset} without the end-of-archive marker; the archive is truncated"
            )
        if header == bytes(BLOCK):
            _end_of_archive(stream, where)
            return members
        size, kind, name = _number(header[124:136]), header[156:157], _header_name(header)
        if size is None or not _checksum_ok(header):
            raise BadArchiveError(f"{where}: a garbage header at byte {stream.offset - BLOCK}; the archive is damaged")
        if kind in _META_TYPES:
            in_a_row += 1
            if in_a_row > META_IN_A_ROW:
                raise UnsafeArchiveError(f"{where}: more than {META_IN_A_ROW} extended headers in a row; refusing")
            (global_pax if kind == b"g" else pending).update(_meta(stream, kind, size, where))
            continue
        name = pending.get("path", global_pax.get("path", name))
        _check_name(name, where)
        _check_mtime(pending.get("mtime", global_pax.get("mtime", _number(header[136:148]))), name, where)
        size_text = pending.get("size", str(size))
        if kind == b"S":
            raise UnsafeArchiveError(f"{where}: member {name!r} is a sparse file; datasets hold none, refusing")
        if size < 0 or not (size_text.isascii() and size_text.isdigit()):
            raise UnsafeArchiveError(f"{where}: member {name!r} has a negative or malformed size ({size_text})")
        size = int(size_text)
        carries_data = kind not in _KNOWN_TYPES or (kind in _DATA_TYPES and not (kind == b"\0" and name.endswith("/")))
        members.append(ScannedMember(name.rstrip("/") or name, size, stream.offset))
        total += size if carries_data else 0
        _check_limits(members, total, limits, where)
        if carries_data and stream.skip(-(-size // BLOCK) * BLOCK) < size:
            raise BadArchiveError(f"{where}: cut short inside member {name!r}; the archive is truncated")
        pending, in_a_row = {}, 0


def _decompressed(fileobj: IO[bytes], kind: str) -> Any:
    if kind == "gzip":
        return gzip.GzipFile(fileobj=fileobj, mode="rb")
    if kind == "bzip2":
        return bz2.BZ2File(fileobj)
    if kind == "xz":
        return lzma.LZMAFile(fileobj)
    return contextlib.nullcontext(fileobj)  # a plain tar: the caller's file, left open


def scan_tar(fileobj: IO[bytes], limits: ExtractLimits, *, where: str | os.PathLike) -> list[ScannedMember]:
    """Check a tar (plain, gzip, bzip2 or xz) from its raw headers, reading the whole stream; return its members.

    Raises BadArchiveError (not a tar, truncated, damaged, bad CRC) or UnsafeArchiveError (negative sizes, huge
    meta headers, GNU sparse records, impossible names, past `limits`), naming `where` (the archive's path).
    """
    fileobj.seek(0)
    kind = kind_of_head(fileobj.read(BLOCK))
    fileobj.seek(0)
    if kind not in ("gzip", "bzip2", "xz", "tar"):
        raise BadArchiveError(
            f"{where}: not a readable tar archive (it is {describe_kind(kind)}). Delete it and run again to download "
            "it afresh"
        )
    try:
        with _decompressed(fileobj, kind) as stream:
            return _scan_headers(_Stream(stream), limits, str(where))
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as error:
        detail = " ".join(str(error).split())[:160]
        raise BadArchiveError(
            f"{where}: not a readable tar archive (it is truncated or damaged; {type(error).__name__}: {detail}). "
            "Delete it and run again to download it afresh"
        ) from error
