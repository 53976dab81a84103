"""safe_extract refuses absolute paths, '..', links, device files, sparse files and archive bombs, and writes nothing
when it refuses; a file that is not a tar archive is named for what it is; extract_into extracts once however many
processes ask, and never publishes half a folder."""

from __future__ import annotations

import io
import os
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import time
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest

from helpers import archives
from helpers.archives import PATH_MAX
from helpers.download import BadArchiveError, ExtractLimits, UnsafeArchiveError, extract_into, file_kind, safe_extract

from .conftest import tar_bytes
from .test_tar_scan import END, _header, _member, _octal, _pax, _refused

ROOT = Path(__file__).resolve().parents[1]


def _archive_with(tmp_path, special: tarfile.TarInfo) -> str:
    path = tmp_path / "bad.tar"
    with tarfile.open(path, "w") as tar:
        good = tarfile.TarInfo("ok/first.txt")
        good.size = 2
        tar.addfile(good, io.BytesIO(b"hi"))
        tar.addfile(special, io.BytesIO(b"x" * special.size) if special.isfile() else None)
    return path


def _file(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = 1
    return info


def _link(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def _device(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
    return info


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (_file("../escape.txt"), "'..'"),
        (_file("ok/../../escape.txt"), "'..'"),
        (_file("/tmp/absolute.txt"), "absolute"),
        (_link("ok/link", "/etc/passwd", tarfile.SYMTYPE), "link"),
        (_link("ok/hard", "/etc/passwd", tarfile.LNKTYPE), "link"),
        (_device("ok/null"), "device"),
    ],
)
def test_unsafe_members_are_refused_before_anything_is_written(tmp_path, member, reason, extraction):
    archive = _archive_with(tmp_path, member)
    dest = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError, match=reason) as info:
        safe_extract(archive, dest)
    assert "bad.tar" in str(info.value) and member.name in str(info.value)
    assert not dest.exists()  # not even the good member: all members are checked first
    assert not (tmp_path / "escape.txt").exists()


def test_a_good_archive_extracts(tmp_path):
    archive = tmp_path / "good.tgz"
    archive.write_bytes(tar_bytes({"top/a.txt": b"a", "top/sub/b.txt": b"bb"}))
    written = safe_extract(archive, tmp_path / "out")
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in written) == ["top/a.txt", "top/sub/b.txt"]
    assert (tmp_path / "out/top/sub/b.txt").read_bytes() == b"bb"


# --- limits, odd names, missing filters, setuid, links already in the destination, not-a-tar files -------------------


def _tar(path, members: dict[str, bytes], mode: str = "w:gz"):
    path.write_bytes(tar_bytes(members, mode=mode))
    return path


class Zeros:
    """A file object of `size` zero bytes, produced as they are read."""

    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        self.left -= size
        return bytes(size)


def test_an_archive_bomb_is_refused_before_anything_is_written(tmp_path):
    archive = tmp_path / "bomb.tgz"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo("top/zeros.bin")
        info.size = 80 * 2**20
        tar.addfile(info, Zeros(info.size))
    assert archive.stat().st_size < 400_000  # 80 MiB from a few hundred KB
    with pytest.raises(UnsafeArchiveError, match=r"bomb.tgz: member 'top/zeros.bin' \(83886080 bytes\)"):
        safe_extract(archive, tmp_path / "out")  # the default limits: 8x the archive's size, at least 64 MiB
    assert not (tmp_path / "out").exists()


def test_limits_on_members_total_and_member_size(tmp_path):
    archive = _tar(tmp_path / "a.tgz", {f"top/{i}.txt": b"x" * 100 for i in range(30)})
    with pytest.raises(UnsafeArchiveError, match="a.tgz: more than 20 members"):
        safe_extract(archive, tmp_path / "o1", limits=ExtractLimits(members=20, member_bytes=1000, total_bytes=10**6))
    with pytest.raises(UnsafeArchiveError, match="past its limits"):
        safe_extract(archive, tmp_path / "o2", limits=ExtractLimits(members=99, member_bytes=99, total_bytes=10**6))
    with pytest.raises(UnsafeArchiveError, match="past its limits"):
        safe_extract(archive, tmp_path / "o3", limits=ExtractLimits(members=99, member_bytes=1000, total_bytes=2000))
    assert not any((tmp_path / name).exists() for name in ("o1", "o2", "o3"))
    assert len(safe_extract(archive, tmp_path / "o4", limits=ExtractLimits(99, 100, 3000))) == 30  # exactly fits


def test_many_members_are_refused_by_default(tmp_path):
    archive = tmp_path / "many.tar"
    with tarfile.open(archive, "w") as tar:
        for i in range(10_001):
            tar.addfile(tarfile.TarInfo(f"d{i}"))  # empty files: only their count is wrong
    with pytest.raises(UnsafeArchiveError, match="more than 10000 members"):
        safe_extract(archive, tmp_path / "out")


@pytest.mark.skipif(shutil.which("tar") is None, reason="needs a tar that writes sparse members")
def test_a_sparse_member_is_refused(tmp_path):
    sparse = tmp_path / "src" / "holes.bin"
    sparse.parent.mkdir()
    with open(sparse, "wb") as f:
        f.truncate(1 << 30)  # 1 GiB of holes: a few KB once archived with --sparse
        f.write(b"data")
    archive = tmp_path / "sparse.tar"
    made = subprocess.run(
        ["tar", "--sparse", "--format=gnu", "-cf", str(archive), "-C", str(tmp_path / "src"), "holes.bin"],
        capture_output=True,
    )
    if made.returncode or archive.stat().st_size > 100_000:
        pytest.skip("this tar cannot write a GNU sparse member")
    with pytest.raises(UnsafeArchiveError, match="holes.bin' is a sparse file"):
        safe_extract(archive, tmp_path / "out", limits=ExtractLimits(10, 2 << 30, 2 << 30))
    assert not (tmp_path / "out").exists()


def test_a_name_with_a_colon_is_an_ordinary_name(tmp_path):
    archive = _tar(tmp_path / "colon.tgz", {"a:b": b"1", "top/c:d.txt": b"2"})
    safe_extract(archive, tmp_path / "out")
    assert (tmp_path / "out" / "a:b").read_bytes() == b"1" and (tmp_path / "out/top/c:d.txt").read_bytes() == b"2"


@pytest.fixture(params=["tarfile's data filter", "a Python without it"])
def extraction(request, monkeypatch):
    """Run a test both ways: through tarfile's `data` filter, and as on a Python that lacks it (Debian 12's 3.11.2),
    where the module writes the members itself; there tarfile's own extractall must never run."""
    if request.param == "a Python without it":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)

        def unfiltered(*args, **kwargs):
            raise AssertionError("tarfile.extractall ran without extraction filters")

        monkeypatch.setattr(tarfile.TarFile, "extractall", unfiltered)
    return request.param


def test_a_python_without_extraction_filters_extracts_the_same_files(tmp_path, extraction):
    members = {"top/a.txt": b"a", "top/sub/b.bin": bytes(range(256)) * 9, "top/sub/deeper/c": b""}
    archive = _tar(tmp_path / "fine.tgz", members)
    written = safe_extract(archive, tmp_path / "out")
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in written) == sorted(members)
    assert _tree(tmp_path / "out") == members


def test_setuid_and_setgid_bits_are_dropped(tmp_path, extraction):
    archive = tmp_path / "modes.tar"
    with tarfile.open(archive, "w") as tar:
        for name, mode in (("top/suid", 0o4755), ("top/sgid", 0o2755), ("top/sticky", 0o1777)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = 1, mode
            tar.addfile(info, io.BytesIO(b"x"))
    safe_extract(archive, tmp_path / "out")
    for name in ("suid", "sgid", "sticky"):
        mode = (tmp_path / "out" / "top" / name).stat().st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX), (name, oct(mode))


# tarfile's own `data` filter, kept before the fixture hides it: the reference for the modes the fallback writes
REFERENCE_FILTER = getattr(tarfile, "data_filter", None)
MODES = (0o777, 0o755, 0o711, 0o700, 0o666, 0o644, 0o640, 0o600, 0o444, 0o400, 0o070, 0o001, 0o4755, 0o2711)


@pytest.mark.skipif(REFERENCE_FILTER is None, reason="this Python's tarfile has no data filter to compare with")
def test_both_ways_write_the_modes_and_times_of_tarfiles_data_filter(tmp_path, extraction):
    """Folder members (an empty one too) are made, a later member of a name replaces the earlier one, and each
    file gets the permission bits tarfile's `data` filter gives it (less setuid/setgid/sticky) and its mtime."""
    archive = tmp_path / "modes.tar"
    with tarfile.open(archive, "w") as tar:
        for name in ("top", "top/empty"):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for i, mode in enumerate(MODES):
            info = tarfile.TarInfo(f"top/m{mode:o}")
            info.size, info.mode, info.mtime = 1, mode, 1_600_000_000 + 1000 * i
            tar.addfile(info, io.BytesIO(b"x"))
        for content in (b"old", b"new!"):
            info = tarfile.TarInfo("top/twice.txt")
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    safe_extract(archive, tmp_path / "out")
    top = tmp_path / "out" / "top"
    assert (top / "empty").is_dir() and (top / "twice.txt").read_bytes() == b"new!"
    special = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
    for i, mode in enumerate(MODES):
        info = tarfile.TarInfo(f"top/m{mode:o}")
        info.size, info.mode = 1, mode
        expected = REFERENCE_FILTER(info, str(tmp_path / "out")).mode & ~special
        written = (top / f"m{mode:o}").stat()
        assert stat.S_IMODE(written.st_mode) == expected, (oct(mode), oct(written.st_mode), oct(expected))
        assert written.st_mtime == 1_600_000_000 + 1000 * i


def test_a_link_already_where_a_file_goes_cannot_redirect_its_write(tmp_path, extraction):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    (tmp_path / "out" / "top").mkdir(parents=True)
    (tmp_path / "out" / "top" / "a.txt").symlink_to(victim)  # left there by someone else
    archive = _tar(tmp_path / "a.tgz", {"top/a.txt": b"gotcha"})
    with pytest.raises(UnsafeArchiveError, match="a.tgz"):
        safe_extract(archive, tmp_path / "out")
    assert victim.read_bytes() == b"precious"


def test_a_link_already_in_the_destination_cannot_redirect_a_write(tmp_path, extraction):
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "top").symlink_to(outside)  # left there by someone else
    archive = _tar(tmp_path / "a.tgz", {"top/escaped.txt": b"gotcha"})
    with pytest.raises(UnsafeArchiveError, match="a.tgz"):
        safe_extract(archive, dest)
    assert not (outside / "escaped.txt").exists()


def test_files_that_are_not_tar_archives_are_named_for_what_they_are(tmp_path):
    zipped = tmp_path / "data.tgz"
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("top/a.txt", "a")
    with pytest.raises(BadArchiveError, match="data.tgz: not a readable tar archive.*a zip archive.*Delete it"):
        safe_extract(zipped, tmp_path / "out")
    page = tmp_path / "page.tgz"
    page.write_bytes(b"<!DOCTYPE html><html><body>Service unavailable</body></html>")
    with pytest.raises(BadArchiveError, match="page.tgz: .*an HTML page"):
        safe_extract(page, tmp_path / "out")
    whole = tar_bytes({f"top/{i}.bin": np.random.default_rng(i).bytes(50_000) for i in range(4)})
    cut = tmp_path / "cut.tgz"
    cut.write_bytes(whole[: len(whole) // 2])  # a truncated gzip stream
    with pytest.raises(BadArchiveError, match="cut.tgz: not a readable tar archive.*truncated or damaged"):
        safe_extract(cut, tmp_path / "out2")
    assert file_kind(zipped) == "zip" and file_kind(page) == "html" and file_kind(cut) == "gzip"


# --- extract_into: one extraction however many processes ask, nothing half-done published --------------------------

EXTRACTOR = """
import os, signal, sys, tarfile
from pathlib import Path
from helpers.download import extract_into
archive, parent, die_after = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
if die_after:  # be killed in the middle of writing the files, as a crash or an OOM kill would
    real = tarfile.TarFile._extract_member
    count = [0]
    def extract_member(self, *args, **kwargs):
        count[0] += 1
        if count[0] == die_after:
            (parent / "killer-inside").touch()
            signal.pause()  # wait here, mid-extraction, for the test's SIGKILL
        return real(self, *args, **kwargs)
    tarfile.TarFile._extract_member = extract_member
def verify(folder):
    if len(list(folder.glob("*.bin"))) != 120:
        raise RuntimeError("incomplete")
folder = extract_into(archive, parent, "top", verify=verify)
print(len(list(folder.glob("*.bin"))))
"""


def _python(code: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _tree(folder) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_concurrent_extractions_with_one_killed_all_see_the_whole_folder(tmp_path):
    members = {f"top/{i:03d}.bin": np.random.default_rng(i).bytes(2000) for i in range(120)}
    archive = _tar(tmp_path / "data.tgz", members)
    reference = extract_into(archive, tmp_path / "single", "top")
    parent = tmp_path / "shared"
    parent.mkdir()
    killer = _python(EXTRACTOR, str(archive), str(parent), "60")
    deadline = time.monotonic() + 60
    while not (parent / "killer-inside").exists():
        assert killer.poll() is None and time.monotonic() < deadline, killer.stderr.read() if killer.stderr else ""
        time.sleep(0.05)
    others = [_python(EXTRACTOR, str(archive), str(parent), "0") for _ in range(3)]
    time.sleep(0.5)  # let them queue on the lock behind the stalled extraction
    killer.send_signal(signal.SIGKILL)
    killer.wait()
    for process in others:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0 and out.strip() == "120", err[-2000:]
    assert _tree(parent / "top") == _tree(reference)
    leftovers = [p.name for p in parent.iterdir() if p.name.startswith(".")]
    assert leftovers == [], leftovers  # the killed extraction's staging folder was cleared, never published


def test_an_incomplete_folder_is_extracted_again_and_a_complete_one_kept(tmp_path):
    archive = _tar(tmp_path / "data.tgz", {"top/a.txt": b"a", "top/b.txt": b"b"})
    parent, checked = tmp_path / "parent", []

    def verify(folder):
        checked.append(folder)
        if not (folder / "b.txt").is_file():
            raise RuntimeError(f"{folder}: b.txt missing")

    (parent / "top").mkdir(parents=True)
    (parent / "top" / "a.txt").write_bytes(b"stale")  # a folder someone left half-done
    folder = extract_into(archive, parent, "top", verify=verify)
    assert _tree(folder) == {"a.txt": b"a", "b.txt": b"b"} and parent / "top" in checked
    archive.unlink()  # a complete folder is returned as it is, without reading the archive
    assert extract_into(archive, parent, "top", verify=verify) == folder and _tree(folder)["a.txt"] == b"a"


def test_an_archive_without_the_expected_top_folder_or_past_the_limits_is_refused(tmp_path):
    archive = _tar(tmp_path / "data.tgz", {"other/a.txt": b"a"})
    with pytest.raises(BadArchiveError, match="data.tgz: expected a top-level folder 'top'"):
        extract_into(archive, tmp_path / "parent", "top")
    assert not (tmp_path / "parent" / "top").exists()
    big = _tar(tmp_path / "big.tgz", {"top/a.bin": bytes(4096)})
    with pytest.raises(UnsafeArchiveError, match="big.tgz.*past its limits"):
        extract_into(
            big, tmp_path / "parent", "top", limits=ExtractLimits(members=10, member_bytes=1024, total_bytes=10**6)
        )
    assert not (tmp_path / "parent" / "top").exists()


@pytest.mark.parametrize("name", ["C:\\\\Windows\\\\evil.dll", "\\\\rooted.txt", "ok\\\\..\\\\..\\\\escape.txt"])
def test_windows_absolute_and_climbing_names_are_refused_on_windows(monkeypatch, name):
    from helpers import archives

    info = _file(name)
    archives._check_member(info, Path("win.tar"))  # an ordinary (odd) file name on POSIX
    monkeypatch.setattr(archives, "os", types.SimpleNamespace(name="nt"))  # only this module sees Windows
    with pytest.raises(UnsafeArchiveError, match="win.tar"):
        archives._check_member(info, Path("win.tar"))


def test_a_path_exactly_at_the_depth_limit_is_allowed():
    from helpers import archives

    archives._check_member(_file("/".join(["d"] * (archives.MAX_DEPTH - 1) + ["f"])), Path("deep.tar"))
    with pytest.raises(UnsafeArchiveError, match="folders deep"):
        archives._check_member(_file("/".join(["d"] * archives.MAX_DEPTH + ["f"])), Path("deep.tar"))


def _base256(value: int) -> bytes:
    return bytes([0x80]) + value.to_bytes(11, "big")


class TestImpossibleMembers:
    """Crafted archives: a modification time no file can have (infinite, NaN, past time_t), a file
    member named as the destination itself, a path longer than PATH_MAX once under the destination, and names that
    differ only in case on a case-insensitive destination are each a named UnsafeArchiveError before anything is
    written, never a bare OverflowError, ValueError or OSError from tarfile halfway through."""

    @pytest.mark.parametrize(
        ("times", "shown"),
        [({"mtime": "1e400"}, "1e400"), ({"mtime": "nan"}, "nan"), ({"mtime": "-inf"}, "-inf"), (None, str(2**80))],
    )
    def test_a_modification_time_no_file_can_have_is_refused(self, tmp_path, times, shown):
        if times is None:  # the raw header field, in GNU base-256
            header = bytearray(_member("top/a", b"1")[:512])
            header[136:148] = _base256(2**80)
            header[148:156] = b" " * 8
            header[148:156] = b"%06o\0 " % sum(header)
            data = bytes(header) + b"1" + bytes(511) + END
        else:
            data = _pax(times) + _member("top/a", b"1") + END
        _refused(tmp_path, data, UnsafeArchiveError, f"'top/a' has the modification time {shown}, which no file can be")

    def test_an_ordinary_old_or_future_time_still_extracts(self, tmp_path):
        archive = tmp_path / "times.tar"
        archive.write_bytes(_pax({"mtime": "-86400.5"}) + _member("top/a", b"1") + _pax({"mtime": "4102444800"}))
        archive.write_bytes(archive.read_bytes() + _member("top/b", b"2") + END)
        safe_extract(archive, tmp_path / "out")
        assert (tmp_path / "out" / "top" / "a").stat().st_mtime == -86400.5
        assert (tmp_path / "out" / "top" / "b").stat().st_mtime == 4102444800

    @pytest.mark.parametrize("name", [".", "./", ""])
    def test_a_file_named_as_the_destination_itself_is_refused(self, tmp_path, name):
        data = (_pax({"path": name}) if not name else b"") + _member(name or "x", b"hello") + END
        _refused(tmp_path, data, UnsafeArchiveError, "is a file named as the destination folder itself")

    def test_a_folder_member_named_dot_still_extracts(self, tmp_path):
        archive = tmp_path / "dot.tar"
        archive.write_bytes(_header("./", _octal(0), b"5") + _member("./top/a", b"1") + END)
        safe_extract(archive, tmp_path / "out")
        assert (tmp_path / "out" / "top" / "a").read_bytes() == b"1"

    def test_a_path_past_path_max_under_the_destination_is_refused_before_writing(self, tmp_path):
        name = "top/" + "/".join(["d" * 200] * (PATH_MAX // 200 + 1)) + "/f"  # every part valid, the whole too long
        _refused(
            tmp_path, _pax({"path": name}) + _member("x", b"1") + END, UnsafeArchiveError, "past the .* a path may"
        )

    @pytest.mark.parametrize(
        ("members", "match"),
        [
            (
                [("top/Data", b"0"), ("top/data/x", b"0")],
                "makes 'top/data' a folder, where another member makes 'top/Data'",
            ),
            ([("top/README", b"0"), ("top/readme", b"0")], "'top/README' and 'top/readme' differ only in case"),
        ],
    )
    def test_names_that_differ_in_case_are_refused_on_a_case_insensitive_destination(
        self, tmp_path, monkeypatch, members, match
    ):
        data = b"".join(_header(name, _octal(0), kind) for name, kind in members) + END
        archive = tmp_path / "case.tar"
        archive.write_bytes(data)
        safe_extract(archive, tmp_path / "sensitive")  # this file system keeps both
        assert len(list((tmp_path / "sensitive" / "top").iterdir())) == 2
        monkeypatch.setattr(archives, "_folds_case", lambda dest: True)  # as on macOS or Windows
        with pytest.raises(UnsafeArchiveError, match=match):
            safe_extract(archive, tmp_path / "out")
        assert not (tmp_path / "out").exists()

    def test_folders_that_differ_in_case_still_extract_on_a_case_insensitive_destination(self, tmp_path, monkeypatch):
        archive = tmp_path / "folders.tar"
        archive.write_bytes(_member("top/Data/x", b"1") + _member("top/data/y", b"2") + END)
        monkeypatch.setattr(archives, "_folds_case", lambda dest: True)
        assert len(safe_extract(archive, tmp_path / "out")) == 2

    def test_the_case_probe_reads_this_file_system_and_leaves_nothing(self, tmp_path):
        (tmp_path / "probe-a").mkdir()
        folds = (tmp_path / "PROBE-A").is_dir()
        assert archives._folds_case(tmp_path / "not" / "yet") is folds  # the nearest existing parent is probed
        assert sorted(p.name for p in tmp_path.iterdir()) == ["probe-a"]
