"""What `pip install .` puts into a user's Python: the library (`helpers/*.py`) under its own import name,
`feeding_the_gpu`, and nothing else: no top-level `helpers` to shadow (or be shadowed by) a project's own module,
no course layer. A real wheel is built from a copy of the checkout (a few seconds) and used from a folder of its own.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
IMPORT_NAME = "feeding_the_gpu"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel `pip install .` would install, built (no network, no build isolation) from a copy of the checkout's
    pyproject.toml, README.md and helpers/ (the course layer included: the build must leave it out)."""
    try:
        setuptools = Version(importlib.metadata.version("setuptools"))
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("building the wheel without build isolation (offline) needs setuptools in this Python")
    if setuptools < Version("64") or (setuptools < Version("70.1") and importlib.util.find_spec("wheel") is None):
        pytest.skip(f"setuptools {setuptools} cannot build the wheel offline: it needs >= 70.1 (or >= 64 and `wheel`)")
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "helpers", source / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    built = subprocess.run(
        [*command, "-w", str(work / "dist"), str(source)], capture_output=True, text=True, timeout=120
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (found,) = (work / "dist").glob("*.whl")
    return found


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_holds_the_library_modules_under_their_own_name_and_nothing_else(wheel):
    names = _names(wheel)
    top = {name.split("/")[0] for name in names}
    assert top == {IMPORT_NAME, f"{IMPORT_NAME}-{PROJECT['version']}.dist-info"}, sorted(top)
    modules = sorted(name.split("/", 1)[1] for name in names if name.startswith(f"{IMPORT_NAME}/"))
    assert modules == sorted(p.name for p in (ROOT / "helpers").glob("*.py")), (
        "the wheel's modules differ from helpers/*.py"
    )
    assert not [n for n in names if "course" in n.split("/")[:-1] or n.startswith("helpers/")]
    with zipfile.ZipFile(wheel) as archive:
        top_level = archive.read(f"{IMPORT_NAME}-{PROJECT['version']}.dist-info/top_level.txt").decode().split()
        metadata = archive.read(f"{IMPORT_NAME}-{PROJECT['version']}.dist-info/METADATA").decode()
    assert top_level == [IMPORT_NAME]
    base = {
        Requirement(line.split(":", 1)[1].strip())
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:")
    }
    base = {str(r) for r in base if r.marker is None or "extra" not in str(r.marker)}
    assert base == {str(Requirement(r)) for r in PROJECT["dependencies"]}  # the base list, as pyproject.toml has it


def test_the_installed_library_imports_and_runs_where_helpers_does_not_exist(wheel, tmp_path):
    """Unpacked into a folder of its own (what pip install does with it), used from a folder outside the checkout by
    this venv's Python with only that folder on PYTHONPATH: `feeding_the_gpu` loads, trains a batch through torch
    and runs as `python -m feeding_the_gpu.doctor`; `helpers` is importable from nowhere."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    elsewhere = tmp_path / "project"
    elsewhere.mkdir()
    # -S: no .pth files, so an editable install of this checkout in this venv (make env's) is not seen; the venv's
    # site-packages (torch, numpy) come after the wheel's folder on the path, as plain folders
    packages = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "COURSE_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(site), *packages])
    code = textwrap.dedent(
        """
        import importlib.util
        import torch
        from torch.utils.data import TensorDataset
        import feeding_the_gpu
        from feeding_the_gpu.loading import make_loader
        from feeding_the_gpu.metrics import psnr_y
        print("FROM", feeding_the_gpu.__file__)
        images = torch.rand(8, 3, 16, 16)
        inputs, _ = next(iter(make_loader(TensorDataset(images, torch.zeros(8)), 4, shuffle=False)))
        print("PSNR", bool((psnr_y(inputs, inputs + 0.01, scale=2) > 30).all()))
        print("HELPERS", importlib.util.find_spec("helpers"))
        print("COURSE", importlib.util.find_spec("feeding_the_gpu.course"))
        """
    )
    run = subprocess.run([sys.executable, "-S", "-c", code], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines() == [
        f"FROM {site / IMPORT_NAME / '__init__.py'}",
        "PSNR True",
        "HELPERS None",
        "COURSE None",
    ]
    doctor = subprocess.run(
        [sys.executable, "-S", "-m", f"{IMPORT_NAME}.doctor", "--help"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert doctor.returncode == 0, doctor.stderr[-3000:]
    assert doctor.stdout.startswith(f"usage: python -m {IMPORT_NAME}.doctor ")


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed here")
def test_the_makefile_runs_the_course_from_the_checkout(tmp_path):
    """The course is not installed: `make course`, `make test`, `make lab` and the kernels and subprocesses they start
    import `helpers` and `helpers.course` from this checkout, whose root the Makefile puts first on PYTHONPATH."""
    probe = tmp_path / "probe.mk"
    probe.write_text("probe:\n\t@echo $$PYTHONPATH\n")
    env = {**os.environ, "PYTHONPATH": "/elsewhere"}
    run = subprocess.run(
        ["make", "-s", "-f", "Makefile", "-f", str(probe), "probe"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == os.pathsep.join([str(ROOT), "/elsewhere"])
