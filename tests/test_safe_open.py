"""Every library module that opens a user's path does it through safe_open (or images.open_image_file and
checkpoint._open_checkpoint and cifar._open_file, the same check written out so those modules copy alone): a walk over the library's source finds every open by path (`open`,
`os.open`, `Path.read_bytes` ..., `np.load`, `np.memmap`, `Image.open`, `torch.load`, `tarfile.open`) and allows only
those given a file object that a safe opener returned, or listed below with the reason they are safe. Then a FIFO (a
writer that never comes) and /dev/zero are put where each such module reads, and each must be named within a
bounded time, never read forever."""

from __future__ import annotations

import ast
import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers.safe_open import NotRegularFileError, check_regular, describe_mode, make_dirs, open_regular

from .test_layering import LIBRARY

RAW_CALLS = {"open", "os.open", "np.load", "np.memmap", "np.fromfile", "np.save", "torch.load", "torch.save"}
RAW_METHODS = {"open", "read_bytes", "read_text", "write_bytes", "write_text"}  # Path.open, Image.open, tarfile.open
SAFE_OPENERS = {"open_regular", "read_regular_bytes", "open_image_file", "_open_checkpoint", "_open_file", "BytesIO"}
READERS = SAFE_OPENERS | {"check_regular", "load_rgb_image", "image_header", "write_text_atomically"}
# Opens by path that are safe for a reason the walk cannot see: (module, function, call) -> why.
REASONED = {
    ("safe_open.py", "_open_fd", "os.open"): "the safe opener itself: O_NONBLOCK, then fstat",
    ("images.py", "open_image_file", "os.open"): "safe_open's check written out (images.py copies alone)",
    ("checkpoint.py", "_open_scratch", "os.open"): "O_CREAT | O_EXCL | O_NOFOLLOW: a fresh file, never a FIFO or link",
    ("checkpoint.py", "_open_checkpoint", "os.open"): "safe_open's check written out (checkpoint.py copies alone)",
    ("cifar.py", "_open_file", "os.open"): "safe_open's check written out (cifar.py copies alone)",
    ("cifar.py", "_write_new", "os.open"): "O_CREAT | O_EXCL | O_NOFOLLOW scratch file, renamed over the target",
    ("checkpoint.py", "save_checkpoint", "torch.save"): "into the fresh file _open_scratch made (O_EXCL)",
    ("download.py", "_open", ".open"): "urllib's opener.open(request): a URL, not a path",
    ("memory.py", "reset_peak_rss", "open"): "a /proc file of this process",
    ("memory.py", "_proc_bytes", "open"): "a /proc file of this process",
    ("precision.py", "_read_cache", "os.open"): "safe_open's check written out (precision.py copies with step.py)",
    ("precision.py", "_locked", "os.open"): "O_NOFOLLOW | O_NONBLOCK, then fstat: a regular lock file or an error",
    ("precision.py", "save_cached_choice", "os.open"): "O_CREAT | O_EXCL | O_NOFOLLOW scratch file, renamed over it",
    ("sr_cache.py", "_build_on_disk", "np.memmap"): "its own staging file, reserved by reserve_file just before",
    ("sr_cache.py", "_build_on_disk", ".write_text"): "meta.json in its own private staging folder",
}
# Modules that read or write paths only through the ones listed here: what the FIFO cases below cover.
THROUGH_OTHERS = {
    "memory.py": "only /proc files of this process",
    "precision.py": "only its own cache file, a FIFO there read as no cache (test_precision.py)",
    "trainer.py": "only atomic.write_text_atomically, a fresh staging file renamed over the target",
    "sr_data.py": "only images.load_rgb_image",
}


def _call_name(call: ast.Call) -> str | None:
    """'open', 'np.memmap', 'Image.open', '.read_bytes' ... for a call that opens something, else None."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id if func.id in RAW_CALLS else None
    if not isinstance(func, ast.Attribute):
        return None
    dotted = f"{func.value.id}.{func.attr}" if isinstance(func.value, ast.Name) else None
    if dotted in RAW_CALLS or (func.attr == "open" and dotted is not None):
        return dotted
    return f".{func.attr}" if func.attr in RAW_METHODS else None


def _is_file(node: ast.AST | None, names: set[str]) -> bool:
    """True when `node` is a file object a safe opener returned: such a call, a name bound to one, or a choice
    between two of them."""
    if isinstance(node, ast.Call):
        return getattr(node.func, "attr", getattr(node.func, "id", None)) in SAFE_OPENERS
    if isinstance(node, ast.IfExp):
        return _is_file(node.body, names) and _is_file(node.orelse, names)
    return isinstance(node, ast.Name) and node.id in names


def _file_names(function: ast.AST) -> set[str]:
    """Names bound in `function` to file objects from safe openers, and parameters annotated as IO."""
    names: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.arg) and node.annotation is not None and "IO" in ast.unparse(node.annotation):
            names.add(node.arg)
    for node in ast.walk(function):
        if isinstance(node, ast.withitem) and _is_file(node.context_expr, names):
            if isinstance(node.optional_vars, ast.Name):
                names.add(node.optional_vars.id)
        elif isinstance(node, ast.Assign) and _is_file(node.value, names):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _file_argument(call: ast.Call, name: str) -> ast.AST | None:
    keywords = {k.arg: k.value for k in call.keywords}
    if name.endswith(".open") and "fileobj" in keywords:
        return keywords["fileobj"]
    position = 1 if name == "torch.save" else 0
    return call.args[position] if len(call.args) > position else keywords.get("f", keywords.get("file"))


def opens_by_path(path: Path) -> list[tuple[str, str, str]]:
    """(module, function, call) of every open in `path` that is not given a file object from a safe opener."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for function in functions:
        safe_names = _file_names(function)
        inner = {
            id(n)
            for f in ast.walk(function)
            if f is not function and isinstance(f, ast.FunctionDef)
            for n in ast.walk(f)
        }
        for call in (n for n in ast.walk(function) if isinstance(n, ast.Call) and id(n) not in inner):
            name = _call_name(call)
            if name is None:
                continue
            by_path = name.startswith(".") and name != ".open"  # Path.read_bytes() and friends open by path
            if by_path or not _is_file(_file_argument(call, name), safe_names):
                found.append((path.name, function.name, name))
    return found


def _reads_paths(path: Path) -> bool:
    """True when a module opens, reads or writes any path, raw or through a safe opener."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    return any(_call_name(c) or getattr(c.func, "attr", getattr(c.func, "id", None)) in READERS for c in calls)


def test_every_open_by_path_in_the_library_is_a_safe_one_or_says_why():
    found = {site for path in LIBRARY for site in opens_by_path(path)}
    unlisted = sorted(found - set(REASONED))
    assert not unlisted, f"opened by path, not through safe_open (route it, or list it with its reason): {unlisted}"
    assert not set(REASONED) - found, f"listed but no longer there: {sorted(set(REASONED) - found)}"


# --- a FIFO and /dev/zero where each module reads ----------------------------------------------------------------


def _within(seconds: float, work: Callable[[], object]) -> object:
    """Run `work` in a thread; fail (instead of hanging the suite) when it has not returned in `seconds`."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(("ok", work()))
        except BaseException as error:  # noqa: BLE001 (handed to the test)
            outcome.append(("error", error))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still blocked after {seconds} s: a FIFO or device was opened as a file"
    if outcome[0][0] == "error":
        raise outcome[0][1]
    return outcome[0][1]


def _jpeg(folder: Path, name: str = "ok.jpg") -> str:
    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((20, 24, 3), 90, np.uint8)).save(folder / name)
    return str(folder / name)


def _fifo(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    os.mkfifo(folder / name)
    return folder / name


def _case_archives(tmp: Path) -> tuple[Callable, Path]:
    from helpers.archives import safe_extract

    fifo = _fifo(tmp, "data.tgz")
    return lambda: safe_extract(fifo, tmp / "out"), fifo


def _case_atomic(tmp: Path) -> tuple[Callable, Path]:
    from helpers.atomic import sources_key

    fifo = _fifo(tmp, "source.jpg")
    return lambda: sources_key([(fifo, 0)], content=True), fifo


def _case_atomic_lock(tmp: Path) -> tuple[Callable, Path]:
    from helpers.atomic import file_lock

    fifo = _fifo(tmp, "data.lock")
    return lambda: file_lock(tmp / "data").__enter__(), fifo


def _case_cifar(tmp: Path) -> tuple[Callable, Path]:
    from helpers.cifar import read_cifar10_batch

    fifo = _fifo(tmp, "data_batch_1.bin")
    return lambda: read_cifar10_batch(fifo), fifo


def _case_checkpoint(tmp: Path) -> tuple[Callable, Path]:
    from helpers.checkpoint import load_checkpoint

    fifo = _fifo(tmp, "last.pt")
    return lambda: load_checkpoint(fifo), fifo


def _case_doctor(tmp: Path) -> tuple[Callable, Path]:
    from helpers.doctor import defines_loader_and_step

    fifo = _fifo(tmp, "train.py")
    return lambda: defines_loader_and_step(fifo), fifo


def _case_download(tmp: Path) -> tuple[Callable, Path]:
    from helpers.download import file_digest

    fifo = _fifo(tmp, "data.tgz")
    return lambda: file_digest(fifo), fifo


def _case_images(tmp: Path) -> tuple[Callable, Path]:
    from helpers.images import load_rgb_image

    fifo = _fifo(tmp, "photo.jpg")
    return lambda: load_rgb_image(fifo), fifo


def _case_jpeg_crop(tmp: Path) -> tuple[Callable, Path]:
    from helpers.jpeg_crop import ReducedCropDataset

    fifo = _fifo(tmp, "photo.jpg")
    return lambda: ReducedCropDataset([(str(fifo), 0)], 16)[0], fifo


def _case_resized_store_meta(tmp: Path) -> tuple[Callable, Path]:
    from helpers.resized_store import ResizedStore, build_resized_store

    store = build_resized_store([(_jpeg(tmp / "photos"), 0)], tmp / "store", short_side=8)
    (store / "meta.json").unlink()
    fifo = _fifo(store, "meta.json")
    return lambda: ResizedStore(store), fifo


def _case_resized_store_source(tmp: Path) -> tuple[Callable, Path]:
    from helpers.resized_store import build_resized_store

    fifo = _fifo(tmp / "photos", "photo.jpg")
    return lambda: build_resized_store([(str(fifo), 0)], tmp / "store", short_side=8), fifo


def _case_safe_open(tmp: Path) -> tuple[Callable, Path]:
    from helpers.safe_open import read_regular_bytes

    fifo = _fifo(tmp, "f.bin")
    return lambda: read_regular_bytes(fifo), fifo


def _case_shards_source(tmp: Path) -> tuple[Callable, Path]:
    from helpers.shards import write_shards

    fifo = _fifo(tmp / "photos", "photo.jpg")
    return lambda: write_shards([(_jpeg(tmp / "photos"), 0), (str(fifo), 1)], tmp / "shards"), fifo


def _case_shards_dev_zero(tmp: Path) -> tuple[Callable, Path]:
    from helpers.shards import write_shards

    return lambda: write_shards([("/dev/zero", 0)], tmp / "shards"), Path("/dev/zero")


def _case_shards_manifest(tmp: Path) -> tuple[Callable, Path]:
    from helpers.shards import shard_paths, write_shards

    shards = write_shards([(_jpeg(tmp / "photos"), 0)], tmp / "shards")[0].parent
    (shards / "shards.json").unlink()
    fifo = _fifo(shards, "shards.json")
    return lambda: shard_paths(shards), fifo


def _case_sr_cache(tmp: Path) -> tuple[Callable, Path]:
    from helpers.sr_cache import DecodedSRCache

    fifo = _fifo(tmp, "photo.png")
    return lambda: DecodedSRCache([fifo], scale=2), fifo


CASES = {
    "archives.py": [_case_archives],
    "atomic.py": [_case_atomic, _case_atomic_lock],
    "checkpoint.py": [_case_checkpoint],
    "cifar.py": [_case_cifar],
    "doctor.py": [_case_doctor],
    "download.py": [_case_download],
    "images.py": [_case_images],
    "jpeg_crop.py": [_case_jpeg_crop],
    "resized_store.py": [_case_resized_store_meta, _case_resized_store_source],
    "safe_open.py": [_case_safe_open],
    "shards.py": [_case_shards_source, _case_shards_dev_zero, _case_shards_manifest],
    "sr_cache.py": [_case_sr_cache],
}


def test_every_module_that_opens_paths_has_a_fifo_case():
    opening = {path.name for path in LIBRARY if _reads_paths(path)}
    assert opening == set(CASES) | set(THROUGH_OTHERS), (
        f"modules that open paths without a case here: {sorted(opening - set(CASES) - set(THROUGH_OTHERS))}; "
        f"cases for modules that no longer open paths: {sorted((set(CASES) | set(THROUGH_OTHERS)) - opening)}"
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", [c for cases in CASES.values() for c in cases], ids=lambda c: c.__name__[6:])
def test_a_fifo_or_device_where_a_module_reads_is_named_not_read(tmp_path, case):
    work, special = case(tmp_path)
    with pytest.raises((OSError, ValueError, RuntimeError)) as info:
        _within(20, work)
    assert special.name in str(info.value), f"the error does not name {special}: {info.value}"
    assert any(word in str(info.value) for word in ("FIFO", "character device", "not a regular file")), info.value


@pytest.mark.timeout(120)
def test_a_fifo_for_a_manifest_makes_the_writers_build_again_not_hang(tmp_path):
    from helpers.resized_store import ResizedStore, build_resized_store
    from helpers.shards import shard_paths, write_shards

    samples = [(_jpeg(tmp_path / "photos"), 0)]
    for write, folder, manifest in (
        (write_shards, "shards", "shards.json"),
        (build_resized_store, "store", "meta.json"),
    ):
        dest = tmp_path / folder
        dest.mkdir()
        os.mkfifo(dest / manifest)
        options = {"short_side": 8} if folder == "store" else {}
        _within(20, lambda: write(samples, dest, **options))  # noqa: B023 (called at once, inside this iteration)
        assert (dest / manifest).is_file()
    assert len(shard_paths(tmp_path / "shards")) == 1 and len(ResizedStore(tmp_path / "store")) == 1


class TestModesAndChecks:
    """safe_open's modes do what the built-in open's do on a regular file (a rewrite leaves only the new bytes, an
    append keeps the old ones), and check_regular refuses a link even when it points at a regular file."""

    def test_writing_over_a_longer_file_leaves_only_the_new_bytes(self, tmp_path):
        path = tmp_path / "data.bin"
        path.write_bytes(b"0123456789" * 10)
        with open_regular(path, "wb") as f:
            f.write(b"new")
        assert path.read_bytes() == b"new"

    def test_appending_keeps_the_old_bytes_and_r_plus_b_does_not_truncate(self, tmp_path):
        path = tmp_path / "data.bin"
        path.write_bytes(b"old")
        with open_regular(path, "ab") as f:
            f.write(b"+new")
        assert path.read_bytes() == b"old+new"
        with open_regular(path, "r+b") as f:
            assert f.read() == b"old+new"
        assert path.read_bytes() == b"old+new"

    def test_check_regular_refuses_a_link_to_a_regular_file(self, tmp_path):
        real = tmp_path / "real.bin"
        real.write_bytes(b"x")
        link = tmp_path / "link.bin"
        link.symlink_to(real)
        assert check_regular(real).st_size == 1
        with pytest.raises(NotRegularFileError, match=r"link\.bin: is a symbolic link"):
            check_regular(link, role="a cache store")

    def test_a_dangling_link_where_a_folder_goes_is_named(self, tmp_path):
        link = tmp_path / "gone"
        link.symlink_to(tmp_path / "nowhere")
        with pytest.raises(NotADirectoryError, match=r"gone: is a symbolic link, not a folder"):
            make_dirs(link / "child")

    def test_describe_mode_names_each_kind(self, tmp_path):
        path = tmp_path / "f"
        path.write_bytes(b"")
        assert describe_mode(os.lstat(path).st_mode) == "a regular file"
        assert describe_mode(os.lstat(tmp_path).st_mode) == "a directory"
