"""Copy tests: three pieces a user would take, copied with exactly the files their docstrings name into a folder
outside the repository, imported there with `helpers` made unimportable, and run on a tiny example."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from .test_layering import HELPERS, declared_siblings

# What each piece's user writes: the example runs inside a package called `mine` that holds only the copied files.
EXAMPLES = {
    "sr_cache": """
        import numpy as np, torch
        from PIL import Image
        from mine.sr_cache import CachedCropLoader, DecodedSRCache
        folder = Path(sys.argv[1])
        for i in range(2):
            Image.fromarray(np.random.default_rng(i).integers(0, 256, (70, 90, 3), dtype=np.uint8)).save(folder / f"{i}.png")
        cache = DecodedSRCache(folder, scale=2, cache_dir=folder / "cache")
        loader = CachedCropLoader(cache, batch_size=4, hr_crop=32, batches_per_epoch=2, seed=0)
        lr, hr = next(iter(loader))
        assert lr.shape == (4, 3, 16, 16) and hr.shape == (4, 3, 32, 32) and hr.dtype == torch.float32
    """,
    "trainer": """
        import torch
        from torch import nn
        from mine.checkpoint import load_checkpoint
        from mine.step import TrainStep
        from mine.trainer import fit
        torch.manual_seed(0)
        data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
        model = nn.Linear(4, 1)
        step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), device="cpu")
        history = fit(model, data, step, epochs=2, checkpoint_dir=Path(sys.argv[1]) / "run", progress=False)
        assert len(history) == 2 and load_checkpoint(Path(sys.argv[1]) / "run" / "last.pt")["epoch"] == 2
    """,
    "measure": """
        import time, torch
        from mine.measure import measure_pipeline
        def slow_loader():
            while True:
                time.sleep(0.01)
                yield torch.zeros(4, 3)
        class Loader:
            def __iter__(self):
                return slow_loader()
        result = measure_pipeline(Loader(), lambda batch: batch.sum(), torch.device("cpu"), steps_per_block=2, blocks=2)
        assert result.data_wait_ms > 5 and result.pipeline_efficiency < 1
    """,
    "doctor": """
        import time, torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset
        from mine.doctor import diagnose
        model = nn.Linear(3, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        def train_step(inputs, targets):  # two arguments, as a TrainStep takes them
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(inputs), targets).backward()
            optimizer.step()
        loader = DataLoader(TensorDataset(torch.randn(64, 3), torch.randint(0, 2, (64,))), batch_size=8)
        diagnosis = diagnose(loader, train_step, budget_s=0.2, blocks=2)
        assert diagnosis.trained_steps > 0 and "DataLoader over TensorDataset" in str(diagnosis)
    """,
}


def files_to_copy(module: str) -> list[str]:
    """The module's own file and the siblings its docstring names."""
    siblings = declared_siblings(HELPERS / f"{module}.py")
    assert siblings is not None, f"{module}.py does not say what to copy with it"
    return [f"{module}.py", *sorted(f"{name}.py" for name in siblings)]


@pytest.mark.parametrize("module", sorted(EXAMPLES))
def test_a_piece_copies_with_the_files_its_docstring_names(module, tmp_path):
    package = tmp_path / "project" / "mine"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name in files_to_copy(module):
        shutil.copy(HELPERS / name, package / name)
    script = tmp_path / "project" / "example.py"
    script.write_text(
        "import sys\nfrom pathlib import Path\n"
        "sys.modules['helpers'] = None  # the course is not installed here: importing it fails\n"
        + textwrap.dedent(EXAMPLES[module])
        + "\nassert not [m for m in sys.modules if m.startswith('helpers.')]\nprint('ok')\n"
    )
    data = tmp_path / "data"
    data.mkdir()
    # hide the course's folder (the script also blocks `import helpers`); keep other entries, such as packages
    # installed with pip --target as tools/gpu_check.sh installs them
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and not (Path(p) / "helpers").is_dir()]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    result = subprocess.run([sys.executable, str(script), str(data)], cwd=script.parent, env=env,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


NOTEBOOKS = sorted((HELPERS.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_what_to_copy_names_every_file_a_piece_needs(path):
    """Each 'What to copy' bullet that names a library module also names the siblings that module needs."""
    notebook = nbformat.read(path, as_version=4)
    sections = [c.source for c in notebook.cells if c.cell_type == "markdown" and "## What to copy" in c.source]
    assert sections, f"{path.name}: no 'What to copy' section"
    section = sections[0].split("## What to copy", 1)[1].split("\n## ", 1)[0]
    named = 0
    for bullet in re.split(r"\n- ", section):
        mentioned = {m for m in re.findall(r"`(\w+)\.py`", bullet) if (HELPERS / f"{m}.py").is_file()}
        for module in mentioned:
            missing = declared_siblings(HELPERS / f"{module}.py") - mentioned
            assert not missing, f"{path.name}: '{bullet.strip()[:60]}...' names {module}.py without {sorted(missing)}"
        named += len(mentioned)
    assert named, f"{path.name}: 'What to copy' names no library file"
