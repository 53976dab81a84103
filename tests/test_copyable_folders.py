"""Copy tests for the JPEG-folder pieces (as tests/test_copyable.py does for the others): each copied with exactly
the files its docstring names into a package outside the repository, imported with `helpers` unimportable, and run
on a few JPEGs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .test_layering import HELPERS, declared_siblings

JPEGS = """
    import numpy as np
    from PIL import Image
    folder = Path(sys.argv[1])
    samples = []
    for i in range(8):
        path = folder / f"{i}.jpg"
        Image.fromarray(np.random.default_rng(i).integers(0, 256, (60, 80, 3), dtype=np.uint8)).save(path)
        samples.append((str(path), i % 2))
"""
EXAMPLES = {
    "jpeg_crop": """
        from mine.jpeg_crop import ReducedCropDataset
        image, label = ReducedCropDataset(samples, size=16)[0]
        assert image.shape == (3, 16, 16) and label == 0
    """,
    "resized_store": """
        from mine.resized_store import ResizedStore, StoreCropDataset, build_resized_store
        store = ResizedStore(build_resized_store(samples, folder / "store", short_side=32))
        image, label = StoreCropDataset(store, size=16)[3]
        assert store.image(0).shape == (32, 43, 3) and image.shape == (3, 16, 16) and label == 1
    """,
    "device_crop": """
        import torch
        from mine.device_crop import IMAGENET_MEAN, IMAGENET_STD, decode_jpegs, device_train_augment
        datas = [torch.frombuffer(bytearray(Path(p).read_bytes()), dtype=torch.uint8) for p, _ in samples]
        batch = device_train_augment(24, mean=IMAGENET_MEAN, std=IMAGENET_STD)(decode_jpegs(datas))
        assert batch.shape == (8, 3, 24, 24) and batch.is_contiguous(memory_format=torch.channels_last)
    """,
    "shards": """
        from mine.shards import sample_label, shard_dataset, write_shards
        shards = write_shards(samples, folder / "shards", per_shard=2)
        read = [sample_label(s) for s in shard_dataset(shards, lambda s: s, rank=1, world_size=2)]
        assert len(shards) == 4 and len(read) == 4
    """,
}


@pytest.mark.parametrize("module", sorted(EXAMPLES))
def test_a_folder_piece_copies_with_the_files_its_docstring_names(module, tmp_path):
    package = tmp_path / "project" / "mine"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    siblings = declared_siblings(HELPERS / f"{module}.py")
    assert siblings is not None
    for name in [module, *siblings]:
        shutil.copy(HELPERS / f"{name}.py", package / f"{name}.py")
    script = tmp_path / "project" / "example.py"
    script.write_text(
        "import sys\nfrom pathlib import Path\nsys.modules['helpers'] = None\n"
        + textwrap.dedent(JPEGS)
        + textwrap.dedent(EXAMPLES[module])
        + "\nassert not [m for m in sys.modules if m.startswith('helpers.')]\nprint('ok')\n"
    )
    data = tmp_path / "data"
    data.mkdir()
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and not (Path(p) / "helpers").is_dir()]
    result = subprocess.run(
        [sys.executable, str(script), str(data)],
        cwd=script.parent,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
        timeout=120,
    )
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]
