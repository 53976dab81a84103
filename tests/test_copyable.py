"""Copy tests: every piece the notebooks' "What to copy" bullets and docs/library.md's library table name, copied with
exactly the files they name into a folder outside the repository and run there, in a Python that sees only torch,
torchvision, numpy and pillow plus the packages the copied modules' docstrings list after "Needs:". Each README row's
module runs its docstring's examples there too: the usage a reader copies with the file works in the copy.

The isolation is a site-packages view: a temporary folder of links to exactly those distributions' top-level
packages and their own dependencies (read from the installed metadata), put on the path of `python -I -S`, so that
neither the course's venv nor the repository can be imported. One subprocess runs every case that needs the same
packages (importing torch once), so the whole file takes seconds, not a venv per test.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .test_layering import HELPERS, LIBRARY, closure, declared_siblings

BASE = ("torch", "torchvision", "numpy", "pillow")  # what every fresh project is assumed to have
IMPORT_NAMES = {"PIL": "pillow"}  # import name -> distribution name, where they differ
LIBRARY_PAGE = HELPERS.parent / "docs" / "library.md"
NOTEBOOKS = sorted((HELPERS.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# --- what the docstrings say, and what the code imports ----------------------------------------------------------


def declared_needs(path: Path) -> tuple[set[str], set[str]] | None:
    """(required, optional) distributions a library module's docstring lists after "Needs:" (None when absent)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    match = re.search(r"^Needs: (.+?)(?:\n\n|\Z)", doc, flags=re.M | re.S)
    if match is None:
        return None
    text = re.sub(r"\([^)]*\)", "", match.group(1).replace("\n", " "))  # drop the reasons in parentheses
    required, optional = set(), set()
    for part in text.split(";"):
        target, part = (optional, part.split(":", 1)[1]) if part.strip().startswith("optional:") else (required, part)
        target.update(w for w in re.split(r"[,\s.]+|\band\b", part) if w)
    required -= {"the", "standard", "library", "only"}
    return required, optional


def third_party_imports(path: Path) -> tuple[set[str], set[str]]:
    """(module level, inside functions) distributions a module imports, by the stdlib's list of its own names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top, inner = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            root = name.split(".")[0]
            if root not in sys.stdlib_module_names and root not in {"__future__", "helpers"}:
                (top if node in tree.body else inner).add(IMPORT_NAMES.get(root, root))
    return top, inner


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: p.name)
def test_docstring_lists_the_packages_the_copy_imports(path):
    """'Needs:' lists what the module and the siblings it copies with import at module level; what only a function
    imports is listed as optional."""
    needs = declared_needs(path)
    assert needs is not None, f"{path.name}: its docstring must list its third-party packages after 'Needs:'"
    required, optional = needs
    top, inner = set(), set()
    for module in {path.stem} | closure(path.stem):
        module_top, module_inner = third_party_imports(HELPERS / f"{module}.py")
        top |= module_top
        inner |= module_inner
    assert required == top, f"{path.name}: 'Needs:' lists {sorted(required)}, but its copy imports {sorted(top)}"
    assert inner - top <= optional, f"{path.name}: imports {sorted(inner - top - optional)} in a function unlisted"


# --- the isolated site-packages view -----------------------------------------------------------------------------


def distribution_closure(names: set[str]) -> dict[str, metadata.Distribution]:
    """Installed distributions `names` need, with their own requirements (markers evaluated here, extras followed)."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(name, frozenset()) for name in names]
    seen: set[tuple[str, frozenset]] = set()
    while todo:
        name, extras = todo.pop()
        key = (canonicalize_name(name), extras)
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = found.get(key[0]) or metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement this platform's install does without (e.g. a CUDA wheel on a CPU build)
        found[key[0]] = dist
        for line in dist.requires or []:
            requirement = Requirement(line)
            environments = [{"extra": extra} for extra in extras | {""}]
            if requirement.marker is None or any(requirement.marker.evaluate(e) for e in environments):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return found


def build_view(folder: Path, names: set[str]) -> Path:
    """A folder of links to the top-level files of exactly the distributions `names` need (and their metadata)."""
    folder.mkdir(parents=True)
    for dist in distribution_closure(names).values():
        for entry in {Path(str(f)).parts[0] for f in dist.files or []}:
            if entry in {"..", "__pycache__"} or entry.endswith(".pth") or (folder / entry).exists():
                continue
            target = Path(str(dist.locate_file(entry)))
            if target.exists():
                (folder / entry).symlink_to(target)
    return folder


RUNNER = """
import json, sys, traceback, textwrap
from pathlib import Path
view, project, cases = sys.argv[1], Path(sys.argv[2]), json.loads(Path(sys.argv[3]).read_text())
sys.path[:0] = [view, str(project)]
sys.modules["helpers"] = None  # the course is not installed here: importing it fails
results = {}
for case in cases:
    try:
        exec(textwrap.dedent(case["code"]), {"__name__": "__copy__", "DATA": project / (case["package"] + "_data")})
        results[case["id"]] = "ok"
    except BaseException:
        results[case["id"]] = traceback.format_exc()[-3000:]
leaked = sorted(m for m, v in sys.modules.items() if v is not None and m.split(".")[0] == "helpers")
print(json.dumps({"results": results, "leaked": leaked, "path": sys.path}))
"""


def run_isolated(tmp: Path, needs: set[str], cases: list[dict]) -> dict:
    """Copy each case's files into its own package under `tmp`, then run every case in one isolated Python."""
    view = build_view(tmp / "site-packages", set(BASE) | needs)
    project = tmp / "project"
    for case in cases:
        package = project / case["package"]
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (project / f"{case['package']}_data").mkdir()
        for name in case["files"]:
            source = Path(name) if Path(name).is_absolute() else HELPERS / name
            shutil.copy(source, package / source.name)
    (tmp / "cases.json").write_text(json.dumps(cases))
    (tmp / "runner.py").write_text(RUNNER)
    command = [sys.executable, "-I", "-S", str(tmp / "runner.py"), str(view), str(project), str(tmp / "cases.json")]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300, cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert not report["leaked"], f"the copies imported the course: {report['leaked']}"
    assert not [p for p in report["path"] if "site-packages" in p and not p.startswith(str(tmp))], report["path"]
    return report["results"]


# --- the pieces: notebook bullets, library table rows, worked examples --------------------------------------------------


def what_to_copy_bullets() -> list[tuple[str, list[str], list[str]]]:
    """(id, library modules named, other backticked names) for each 'What to copy' bullet naming a module."""
    bullets = []
    for path in NOTEBOOKS:
        cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]
        sections = [s.split("## What to copy", 1)[1].split("\n## ", 1)[0] for s in cells if "## What to copy" in s]
        for number, bullet in enumerate(re.split(r"\n- ", sections[0]) if sections else []):
            modules = sorted({m for m in re.findall(r"`(\w+)\.py`", bullet) if (HELPERS / f"{m}.py").is_file()})
            if modules:
                names = sorted(set(re.findall(r"`(\w+)`", bullet)))
                bullets.append((f"{path.stem[:2]}-{number}-{'+'.join(modules)}", modules, names))
    return bullets


def library_rows() -> list[tuple[str, list[str]]]:
    """(module, the files its 'copy with' column names) for each row of docs/library.md's library table."""
    rows = []
    for line in LIBRARY_PAGE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`\w+\.py`", cells[0]):
            rows.append((cells[0].strip("`")[:-3], re.findall(r"`(\w+)\.py`", cells[2])))
    return rows


# What each piece's user writes: `mine` is the package holding only the copied files, DATA an empty folder.
EXAMPLES = {
    "sr_cache": """
        import numpy as np, torch
        from PIL import Image
        from mine.sr_cache import CachedCropLoader, DecodedSRCache
        for i in range(2):
            pixels = np.random.default_rng(i).integers(0, 256, (70, 90, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(DATA / f"{i}.png")
        cache = DecodedSRCache(DATA, scale=2, cache_dir=DATA / "cache")
        loader = CachedCropLoader(cache, batch_size=4, hr_crop=32, batches_per_epoch=2, seed=0)
        lr, hr = next(iter(loader))
        assert lr.shape == (4, 3, 16, 16) and hr.shape == (4, 3, 32, 32) and hr.dtype == torch.float32
    """,
    "sr_data": """
        import numpy as np, torch
        from PIL import Image
        from mine.sr_data import LazyCropSRDataset, PairedSRAugment
        Image.fromarray(np.random.default_rng(0).integers(0, 256, (70, 90, 3), dtype=np.uint8)).save(DATA / "0.png")
        lr, hr = LazyCropSRDataset(DATA, scale=2, hr_crop=32, seed=0)[0]
        lr, hr = PairedSRAugment()(lr[None], hr[None])  # flips and rotations: no kornia needed
        assert lr.shape == (1, 3, 16, 16) and hr.shape == (1, 3, 32, 32)
        try:
            PairedSRAugment(jitter=0.1)  # the colour jitter needs kornia, which this project does not have
        except ImportError as error:
            assert "pip install kornia" in str(error), error
        else:
            raise AssertionError("PairedSRAugment(jitter=0.1) worked without kornia")
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
        history = fit(model, data, step, epochs=2, checkpoint_dir=DATA / "run", progress=False)
        assert len(history) == 2 and load_checkpoint(DATA / "run" / "last.pt")["epoch"] == 2
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
        assert result.data_wait_ms > 5
    """,
    "loading": """
        import torch
        from mine.loading import DeviceTensorLoader, make_loader, sweep_loader_settings
        images, labels = torch.randint(0, 256, (10, 3, 8, 8), dtype=torch.uint8), torch.arange(10)
        assert sum(len(x) for x, _ in DeviceTensorLoader(images, labels, batch_size=4)) == 10
        dataset = torch.utils.data.TensorDataset(images.float(), labels)
        assert len(list(make_loader(dataset, 4, seed=0))) == 2
        rows = sweep_loader_settings(dataset, [{"num_workers": 0}], batch_size=4, batches=1)  # no tqdm needed
        assert rows[0]["num_workers"] == 0 and rows[0]["samples_per_s"] > 0
    """,
    "augment": """
        import torch
        from mine.augment import cifar_train_augment
        torch.manual_seed(0)
        out = cifar_train_augment()(torch.randint(0, 256, (6, 3, 32, 32), dtype=torch.uint8))
        assert out.shape == (6, 3, 32, 32) and out.dtype == torch.float32 and not torch.equal(out[0], out[1])
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
    "doctor_watch": """
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset
        from mine.doctor_watch import watch
        model = nn.Linear(3, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(TensorDataset(torch.randn(64, 3), torch.randint(0, 2, (64,))), batch_size=8)
        with watch(budget_s=0.01, steps=3, warmup=2, notify=None) as doctor:
            for epoch in range(100):
                for inputs, targets in loader:
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(model(inputs), targets).backward()
                    optimizer.step()
        assert "your own loop as it ran" in str(doctor.diagnosis())
    """,
}


def needs_of(modules: list[str]) -> set[str]:
    """The required packages the docstrings of `modules` list."""
    found: set[str] = set()
    for module in modules:
        needs = declared_needs(HELPERS / f"{module}.py")
        found |= needs[0] if needs else set()
    return found - set(BASE)  # the base packages are in every view


def import_code(package: str, modules: list[str], names: list[str], *, examples: bool = False) -> str:
    """Import every module of the copy, and check each backticked name that a module defines is there (`examples`:
    and that every module's docstring examples run in the copy)."""
    defined = [n for n in names if any(hasattr(__import__(f"helpers.{m}", fromlist=["_"]), n) for m in modules)]
    code = textwrap.dedent(f"""
        import importlib
        copies = [importlib.import_module("{package}." + m) for m in {modules!r}]
        missing = [n for n in {defined!r} if not any(hasattr(c, n) for c in copies)]
        assert not missing, f"not in the copy: {{missing}}"
    """)
    return code + (EXAMPLES_RUN if examples else "")


EXAMPLES_RUN = textwrap.dedent("""
    import doctest
    for copy in copies:
        runner, report = doctest.DocTestRunner(), []
        for test in doctest.DocTestFinder().find(copy):
            runner.run(test, out=report.append)
        assert runner.tries and not runner.failures, f"{copy.__name__}'s docstring examples: " + "".join(report)
""")


def all_cases() -> list[dict]:
    """Every case: each notebook bullet, each library table row (module + its 'copy with' column) and each example."""
    cases = []
    for number, (case_id, modules, names) in enumerate(what_to_copy_bullets()):
        package = f"bullet{number}"
        cases.append(
            {
                "id": f"notebook {case_id}",
                "package": package,
                "files": [f"{m}.py" for m in modules],
                "needs": sorted(needs_of(modules)),
                "code": import_code(package, modules, names),
            }
        )
    for number, (module, siblings) in enumerate(library_rows()):
        package = f"row{number}"
        cases.append(
            {
                "id": f"library table {module}.py",
                "package": package,
                "files": [f"{m}.py" for m in {module, *siblings}],
                "needs": sorted(needs_of([module])),
                "code": import_code(package, [module], [], examples=True),
            }
        )
    for module, code in sorted(EXAMPLES.items()):
        files = [f"{module}.py", *sorted(f"{name}.py" for name in declared_siblings(HELPERS / f"{module}.py") or ())]
        package = f"example_{module}"
        cases.append(
            {
                "id": f"example {module}",
                "package": package,
                "files": files,
                "needs": sorted(needs_of([module])),
                "code": code.replace("mine.", f"{package}."),
            }
        )
    return cases


CASES = all_cases()


@pytest.fixture(scope="module")
def isolated_results(tmp_path_factory) -> dict[str, str]:
    """Run every case, one isolated Python per distinct set of packages."""
    groups: dict[tuple[str, ...], list[dict]] = {}
    for case in CASES:
        groups.setdefault(tuple(case["needs"]), []).append(case)
    results = {}
    for number, (needs, cases) in enumerate(sorted(groups.items())):
        start = time.perf_counter()
        results.update(run_isolated(tmp_path_factory.mktemp(f"copy{number}"), set(needs), cases))
        print(f"{len(cases)} copies with {', '.join(BASE + needs)}: {time.perf_counter() - start:.1f} s")
    return results


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_a_copied_piece_runs_with_only_the_packages_its_docstring_lists(case, isolated_results):
    assert isolated_results[case["id"]] == "ok", (
        f"{case['id']} ({case['files']}, needs {case['needs']}):\n" + (isolated_results[case["id"]])
    )


def test_every_bullet_row_and_module_is_covered():
    assert len([c for c in CASES if c["id"].startswith("notebook")]) >= len(NOTEBOOKS)
    assert {module for module, _ in library_rows()} == {p.stem for p in LIBRARY}, "docs/library.md's library table"
    assert {"loading", "augment", "sr_cache", "sr_data"} <= set(EXAMPLES)


def test_the_isolation_refuses_a_package_no_docstring_lists(tmp_path):
    """The planted bug: a module importing psutil (installed in the course's venv, listed nowhere) must fail here."""
    metadata.distribution("psutil")  # present where the tests run, so only the isolation can make the import fail
    planted = tmp_path / "planted.py"
    planted.write_text("import psutil\n")
    results = run_isolated(
        tmp_path / "run",
        set(),
        [
            {"id": "planted", "package": "mine", "files": [str(planted)], "code": "import mine.planted"},
            {"id": "kornia", "package": "other", "files": [], "code": "import kornia"},
        ],
    )
    assert "No module named 'psutil'" in results["planted"], results["planted"]
    assert "No module named 'kornia'" in results["kornia"], results["kornia"]


NOTEBOOK_IDS = [path.name for path in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NOTEBOOK_IDS)
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
FOLDER_EXAMPLES = {
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


class TestJpegFolderPieces:
    """The JPEG-folder pieces copy too: each copied with exactly the files its docstring names into a package outside
    the repository, imported with `helpers` unimportable, and run on a few JPEGs."""

    @pytest.mark.parametrize("module", sorted(FOLDER_EXAMPLES))
    def test_a_folder_piece_copies_with_the_files_its_docstring_names(self, module, tmp_path):
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
            + textwrap.dedent(FOLDER_EXAMPLES[module])
            + "\nassert not [m for m in sys.modules if m.startswith('helpers.')]\nprint('ok')\n"
        )
        data = tmp_path / "data"
        data.mkdir()
        paths = [
            p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and not (Path(p) / "helpers").is_dir()
        ]
        result = subprocess.run(
            [sys.executable, str(script), str(data)],
            cwd=script.parent,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
            timeout=120,
        )
        assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]
