"""An image folder as WebDataset tar shards, and reading them back for many machines: every rank gets its own
disjoint, equal share of the shards (reshuffled each epoch with a seed all ranks share), every DataLoader worker its
own share of the rank's shards, and samples are shuffled in a buffer. Files go into the shards as they are (the
JPEG bytes, not decoded pixels), so a shard is as small as the folder and streams from a network store in large
sequential reads instead of one small read per image.

A set is complete only when `shards.json` is there and every shard it lists is whole (its recorded size, and the
end-of-archive marker last): a shard cut short is written again, never read as fewer samples. A reader records
each shard's identity (device, inode, size, modification time) when it is made and checks it as it opens the
shard, so a set rebuilt under a running reader is an error, never a mix of two builds. Every file is opened as a
regular file (a FIFO or device is named, never read forever), no file past `member_bytes` is read into memory, and
a shard's headers get tar_scan.py's checks before tarfile acts on them (a shard of another tool may be crafted).
Compressed shards (.tar.gz ...) are read too; a sample with a member twice is an error, not a wds ValueError.

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     samples = [(f"{tmp}/{i}.txt", i % 2) for i in range(4)]  # (file, label): JPEGs as a rule
    ...     for path, label in samples: _ = Path(path).write_text(f"sample {label}")
    ...     shards = write_shards(samples, f"{tmp}/shards", per_shard=2)
    ...     data = shard_dataset(shards, lambda sample: (sample["txt"], sample_label(sample)), shuffle_buffer=0)
    ...     print([shard.name for shard in shards], list(data))
    ['shard-000000.tar', 'shard-000001.tar'] [(b'sample 0', 0), (b'sample 1', 1), (b'sample 0', 0), (b'sample 1', 1)]

Copy with: atomic.py with safe_open.py (the shards are published complete, once; regular files only).
Needs: webdataset.
"""

from __future__ import annotations

import json
import os
import random
import re
import tarfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import webdataset as wds
from webdataset.compat import FluidInterface  # not exported at the top level before webdataset 1.0

from .atomic import build_once, sources_key
from .safe_open import check_regular, open_regular

MANIFEST = "shards.json"
MEMBER_BYTES = 64 << 20  # the largest file a shard takes or gives: far above any photograph, far below a memory
END_BYTES = 1024  # a tar ends with two zero blocks
BLOCK = 512
META_BYTES = 8 << 10  # a long-name or pax header past this holds no sample's name (PATH_MAX is 4096)
META_IN_A_ROW = 4  # a global pax header, a pax header, a long name and a long link before one member
_META_TYPES = {
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
}
MANIFEST_BYTES = 64 << 20  # a manifest lists names and sizes: past this it is not one
_SHARD_NAME = re.compile(r"shard-[0-9]{6,}\.tar")  # what wds.ShardWriter names them ("shard-%06d.tar")


class ShardError(ValueError):
    """A shard set or sample cannot be used: incomplete, rebuilt under a reader, a bad label, a member too big."""


def _read_source(path: str, limit: int) -> bytes:
    """A source file's bytes: a regular file (a FIFO or /dev/zero is refused) of at most `limit` bytes."""
    with open_regular(path, role="a sample for the shards") as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        raise ShardError(
            f"{path}: {max(size, len(data))} bytes, past the {limit}-byte limit a shard member has; it is not an "
            "image of this set (remove it), or pass a larger member_bytes= to write_shards and shard_dataset"
        )
    return data


def _extension(path: str) -> str:
    """The name a source's bytes go under in its sample: its extension, lower case ("bin" without one)."""
    extension = Path(path).suffix.lower().lstrip(".") or "bin"
    if extension == "cls" or extension.startswith("__"):
        raise ShardError(
            f"{path}: its extension .{extension} is the name a sample's label (cls) or WebDataset's own fields "
            "(__key__ ...) go under, so one would replace the other; rename the file"
        )
    return extension


def _manifest(folder: Path) -> dict:
    """The manifest of a shard set (a FIFO or a file past MANIFEST_BYTES there is refused, not read forever)."""
    with open_regular(folder / MANIFEST, role="a shard set's manifest") as f:
        data = f.read(MANIFEST_BYTES + 1)
    manifest = json.loads(data) if len(data) <= MANIFEST_BYTES else None
    shards, sizes = (manifest.get("shards"), manifest.get("bytes")) if isinstance(manifest, dict) else (None, None)
    names = isinstance(shards, list) and all(isinstance(n, str) and _SHARD_NAME.fullmatch(n) for n in shards)
    counts = isinstance(sizes, list) and all(type(size) is int and size >= 0 for size in sizes)
    if not (names and counts and len(shards) == len(sizes)):  # type: ignore[arg-type]
        raise ValueError(
            f"{folder / MANIFEST}: not a manifest of write_shards (the names of its shards, shard-NNNNNN.tar in this "
            "folder, and their sizes in bytes)"
        )
    return manifest  # type: ignore[return-value]


def _shard_problem(path: Path, size: int) -> str | None:
    """Why the shard at `path` is not the whole shard of `size` bytes the manifest records (None when it is)."""
    try:
        got = check_regular(path, role="a shard").st_size
        if got == size:
            with open_regular(path, role="a shard") as f:
                end = os.pread(f.fileno(), END_BYTES, size - END_BYTES) if size >= END_BYTES else b""
    except OSError as error:
        return str(error)
    if got != size:
        return f"{path} holds {got} bytes where {MANIFEST} records {size} (cut short, or changed)"
    return None if end == bytes(END_BYTES) else f"{path} does not end with the end-of-archive marker (damaged)"


def _set_problem(folder: Path) -> str | None:
    """Why `folder` is not a complete shard set (None when it is): no manifest, or a shard not whole."""
    try:
        manifest = _manifest(folder)
    except (OSError, ValueError) as error:
        return f"no readable {MANIFEST} ({error})"
    problems = (_shard_problem(folder / name, int(size)) for name, size in zip(manifest["shards"], manifest["bytes"]))
    return next((problem for problem in problems if problem is not None), None)


def write_shards(
    samples: Sequence[tuple[str, int]],
    dest: str | os.PathLike,
    *,
    per_shard: int = 256,
    classes: Sequence[str] = (),
    member_bytes: int = MEMBER_BYTES,
    content: bool = False,
) -> list[Path]:
    """Write (path, label) samples as tar shards of `per_shard` samples into the folder `dest` (once: a complete set
    made from the same files, by path, label, size and modification time, or bytes with `content=True`, is kept),
    each sample the file's own bytes under its extension plus its label as "cls". Returns the shard paths in order.

    A source past `member_bytes`, a FIFO or a device is a ShardError or NotRegularFileError naming it; a full disk
    or a read-only `dest` is atomic.DestinationError naming `dest`, and the set that was there stays whole; so is a
    `dest` that holds files write_shards did not write (they are never replaced)."""
    samples = [(str(path), int(label)) for path, label in samples]
    extensions = [_extension(path) for path, _ in samples]  # before anything is read
    made_from = sources_key(samples, content=content)

    def build(staging: Path) -> None:
        with wds.ShardWriter(str(staging / "shard-%06d.tar"), maxcount=per_shard, verbose=0) as sink:
            for key, ((path, label), extension) in enumerate(zip(samples, extensions)):
                sink.write({"__key__": f"{key:08d}", extension: _read_source(path, member_bytes), "cls": label})
        shards = sorted(p.name for p in staging.glob("shard-*.tar"))
        manifest = {"samples": len(samples), "per_shard": per_shard, "shards": shards, "classes": list(classes)}
        manifest.update(bytes=[(staging / name).stat().st_size for name in shards], sources=made_from)
        with open_regular(staging / MANIFEST, "wb", exclusive=True, role="a shard set's manifest") as f:
            f.write(json.dumps(manifest).encode("utf-8"))
        problem = _set_problem(staging)
        if problem is not None:
            raise ShardError(f"{dest}: the shards just written are not whole ({problem}); write them again")

    def complete(path: Path) -> bool:
        try:
            manifest = _manifest(path)
        except (OSError, ValueError):
            return False
        same = manifest.get("samples") == len(samples) and manifest.get("per_shard") == per_shard
        return same and manifest.get("sources") == made_from and _set_problem(path) is None

    build_once(
        dest, build, is_complete=complete, owns=lambda name: name == MANIFEST or bool(_SHARD_NAME.fullmatch(name))
    )
    return shard_paths(dest)


def shard_paths(folder: str | os.PathLike) -> list[Path]:
    """The shards a write_shards folder holds, in order (from its manifest), each checked whole; else ShardError."""
    folder = Path(folder)
    problem = _set_problem(folder)
    if problem is not None:
        raise ShardError(f"{folder}: not a complete shard set: {problem}; write it (again) with write_shards")
    return [folder / name for name in _manifest(folder)["shards"]]


def rank_shards(shards: Sequence[Any], *, rank: int = 0, world_size: int = 1, seed: int = 0, epoch: int = 0) -> list:
    """This rank's shards for this epoch: all shards shuffled with (seed, epoch), the same order on every rank, then
    every world_size-th from position `rank`, cut so every rank gets the same count (so all take the same number of
    steps; the few shards left over come back in other epochs). Raises when there are fewer shards than ranks."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world_size {world_size}")
    if len(shards) < world_size:
        raise ValueError(
            f"{len(shards)} shards for {world_size} ranks: write smaller shards (per_shard) or use fewer ranks"
        )
    order = list(shards)
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    share = len(order) // world_size
    return order[rank::world_size][:share]


class ShardPipeline(wds.DataPipeline, FluidInterface):
    """A WebDataset pipeline (`.map`, `.repeat`, `.batched` ... as on wds.WebDataset) over checked shards."""


def _identity(info: os.stat_result) -> tuple[int, int, int, int]:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def _recorded(urls: list[str]) -> dict[str, tuple[int, int, int, int]]:
    """Each shard's identity now, checked against the manifest beside it (when there is one) first."""
    identities, sizes = {}, {}  # sizes: what each folder's manifest records, read once a folder
    for url in urls:
        path = Path(url)
        if path.parent not in sizes:
            try:
                manifest = _manifest(path.parent)
                sizes[path.parent] = dict(zip(manifest["shards"], manifest["bytes"]))
            except FileNotFoundError:
                sizes[path.parent] = {}  # shards written by another tool: only their identity is checked
            except (OSError, ValueError) as error:
                raise ShardError(
                    f"{path.parent}: its {MANIFEST} cannot be read ({error}); write the set again"
                ) from error
        if path.name in sizes[path.parent]:
            problem = _shard_problem(path, int(sizes[path.parent][path.name]))
            if problem is not None:
                raise ShardError(f"{path}: not a whole shard: {problem}; write the set again with write_shards")
        with open_regular(path, role="a shard") as f:  # the file itself, through any link a user made
            identities[url] = _identity(os.fstat(f.fileno()))
    return identities


class _Refused(ValueError):
    """A header _CheckedInfo will not let tarfile act on (the caller names the shard)."""


class _CheckedInfo(tarfile.TarInfo):
    """tarfile's reader of one header, with tar_scan.py's checks made before tarfile acts on it: no negative size,
    no long-name or pax header past META_BYTES (tarfile reads one whole into memory), no GNU sparse file (tarfile
    reads its map, gigabytes from a few KiB, before the member is seen), at most META_IN_A_ROW extended headers in a
    row (each one recurses). tarfile has no hook for this: these are its per-header methods, alike in 3.10 to 3.13."""

    def _proc_member(self, archive: Any) -> Any:
        if self.size < 0:
            raise _Refused(f"member {self.name!r} has a negative size ({self.size})")
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise _Refused(f"member {self.name!r} is a GNU sparse file")
        in_a_row = getattr(archive, "_meta_in_a_row", 0) + 1 if self.type in _META_TYPES else 0
        if in_a_row and self.size > META_BYTES:
            raise _Refused(f"an extended header of {self.size} bytes, past the {META_BYTES} a sample's name needs")
        if in_a_row > META_IN_A_ROW:
            raise _Refused(f"more than {META_IN_A_ROW} extended headers in a row")
        archive._meta_in_a_row = in_a_row
        return super()._proc_member(archive)  # type: ignore[misc]  # private to tarfile (see above)

    def _proc_gnusparse_00(self, *args: Any) -> None:
        raise _Refused("a member is a GNU sparse file (pax GNU.sparse records)")

    _proc_gnusparse_01 = _proc_gnusparse_10 = _proc_gnusparse_00


def _members(f: IO[bytes], url: str, limit: int) -> Iterator[dict]:
    """The regular files of one shard (plain or compressed) as WebDataset's {fname, data, __url__}, none past `limit`
    bytes read; ShardError naming the shard for a damaged or crafted one, or a sample with a member twice."""
    key, suffixes, samples, others = None, set[str](), 0, 0
    try:
        with tarfile.open(fileobj=f, mode="r|*", tarinfo=_CheckedInfo) as tar:
            for info in tar:
                if not info.isreg():
                    continue
                prefix, suffix = wds.tariterators.base_plus_ext(info.name)
                where = f"member {info.name!r} (sample {prefix or info.name!r})"
                if info.size > limit or info.size < 0:  # a pax size record can be negative too
                    raise ShardError(
                        f"{url}: {where} is {info.size} bytes, past the {limit}-byte limit (or negative); the shard "
                        "is not one of this set: write it again, or pass a larger member_bytes="
                    )
                if prefix is None:
                    others += 1
                    continue
                key, suffixes = (key, suffixes) if prefix == key else (prefix, set())
                if suffix.lower() in suffixes or suffix.startswith("__"):
                    why = "is named as WebDataset's own fields" if suffix.startswith("__") else "is there twice"
                    raise ShardError(f"{url}: {where} {why} (names count in lower case); write the shard again")
                suffixes.add(suffix.lower())
                extracted = tar.extractfile(info)
                assert extracted is not None  # a regular member always has data
                yield {"fname": info.name, "data": extracted.read(), "__url__": url}
                samples += 1
                tar.members = []  # type: ignore[attr-defined]  # constant memory over a stream of any length
            tar.fileobj.seek(tar.offset + BLOCK)  # past the first zero block
            end = tar.fileobj.read(BLOCK)  # the marker's second zero block
    except _Refused as error:
        raise ShardError(
            f"{url}: {error}; no shard write_shards writes has one, so it is crafted or damaged"
        ) from error
    except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
        raise ShardError(f"{url}: the shard is damaged or cut short ({error}); write the set again") from error
    if end != bytes(BLOCK):
        raise ShardError(f"{url}: ends without the end-of-archive marker (cut short); write the set again")
    if others and not samples:
        raise ShardError(f"{url}: holds no WebDataset samples (members named KEY.EXTENSION); not a shard of this kind")


_CHANGED = (
    "the shard set was written again while this dataset read it (this file is not the one it started with); make "
    "the dataset again (each epoch does) so that it reads one build, not two"
)


def _checked_files(identities: dict[str, tuple[int, int, int, int]], limit: int) -> Callable:
    """The stage that opens each shard, checks it is the file recorded when the dataset was made, and expands it."""

    def stage(source: Any) -> Iterator[dict]:
        for item in source:
            url = item["url"]
            try:
                f = open_regular(url, role="a shard")
            except FileNotFoundError as error:
                raise ShardError(f"{url}: {_CHANGED}") from error
            with f:
                if _identity(os.fstat(f.fileno())) != identities[url]:
                    raise ShardError(f"{url}: {_CHANGED}")
                yield from _members(f, url, limit)
            yield {}  # WebDataset's end-of-shard marker: a sample never spans two shards

    return stage


def shard_dataset(
    shards: Sequence[str | os.PathLike],
    decode: Callable[[dict], Any],
    *,
    rank: int = 0,
    world_size: int = 1,
    seed: int = 0,
    epoch: int = 0,
    shuffle_buffer: int = 1000,
    member_bytes: int = MEMBER_BYTES,
) -> ShardPipeline:
    """A WebDataset pipeline over this rank's shards (rank_shards), split again per DataLoader worker
    (wds.split_by_worker), samples shuffled in a buffer of `shuffle_buffer` (0: in shard order) and turned into
    training samples by `decode(sample)` (a dict: "__key__", "__url__", the file's extension -> its bytes, "cls" ->
    the label as bytes). Give every worker at least one shard: a rank's shard count should be a multiple of its
    workers. Each shard is checked whole now and checked to be the same file when it is read (ShardError if not)."""
    urls = [str(path) for path in rank_shards(shards, rank=rank, world_size=world_size, seed=seed, epoch=epoch)]
    stages: list = [wds.SimpleShardList(urls), wds.split_by_worker, _checked_files(_recorded(urls), member_bytes)]
    stages.append(wds.tariterators.group_by_keys)
    if shuffle_buffer:
        # a seed per rank, epoch and worker: different buffers everywhere, the same ones when run again
        stages.append(_worker_shuffle(shuffle_buffer, seed * 1_000_003 + epoch * 1_009 + rank))
    return ShardPipeline(*stages, wds.filters.map(decode))


def _worker_shuffle(buffer: int, seed: int) -> Callable:
    def stage(source: Any) -> Any:
        _, _, worker, _ = wds.utils.pytorch_worker_info()
        return wds.filters.shuffle(buffer, min(buffer, 100), seed=seed * 101 + worker)(source)

    return stage


def sample_label(sample: dict) -> int:
    """The label of a shard sample (stored as the bytes of its decimal text); ShardError naming the shard and key
    when it has none or it is not a whole number."""
    where = f"{sample.get('__url__', '<a shard>')}: sample {sample.get('__key__')!r}"
    if "cls" not in sample:
        raise ShardError(f"{where} has no label (no .cls member); write the shards with labels, or decode without")
    value = sample["cls"]
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    if not re.fullmatch(r"\s*[0-9]+\s*", text):
        raise ShardError(f"{where} has the label {text[:40]!r}, not a class index (a whole number); write it again")
    return int(text)
