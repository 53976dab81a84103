"""Dependencies in layers: the base list is what the library (`helpers/*.py`) needs, so `pip install .` installs the
library alone; the `library` extra adds what a library function imports where it is used; the `course` extra is
what the notebooks and `helpers/course` import, with no Jupyter server in it (Colab and any Jupyter bring their own);
the course runner and Lab (`jupyter`), the tests and the browser test are further extras. The README's table of
layers lists exactly these."""

from __future__ import annotations

import ast
import importlib.metadata
import itertools
import re
import sys
from pathlib import Path

import nbformat
import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
# What a Colab runtime or another Jupyter already runs, and what the base install must never pull in.
JUPYTER_SERVER = {
    "jupyterlab",
    "jupyter-server",
    "notebook",
    "nbconvert",
    "nbclient",
    "jupyterlab-server",
    "terminado",
    "jupyter-lsp",
    "ipykernel",
    "nbval",
    "pytest",
}
OPTIONAL_IMPORTS = {"nvidia", "torchcodec", "ffcv", "pynvml", "cv2"}  # DALI, torchcodec, FFCV, NVML, OpenCV: used
# where installed, never required


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def names(requirements: list[str]) -> set[str]:
    return {canonical(Requirement(r).name) for r in requirements}


def closure(requirements: list[str]) -> set[str]:
    """Every distribution the requirements pull in, read from the metadata of what is installed here."""
    environment = default_environment()
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        name = canonical(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(requirement.name) or []
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(
                f"{requirement.name} is not installed here: run `make env` (or pip install -e '.[course,jupyter,test]')"
            )
        for text in requires:
            child = Requirement(text)
            extras = requirement.extras or {""}
            if child.marker is None or any(child.marker.evaluate({**environment, "extra": e}) for e in extras):
                todo.append(child)
    return seen


def third_party_imports(sources: list[str]) -> set[str]:
    """Top-level modules imported by the sources, less the standard library and the course itself."""
    found = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"helpers", "__future__"} - OPTIONAL_IMPORTS


def _owners(modules: set[str]) -> dict[str, list[str]]:
    """Top-level module -> distributions, also for distributions without top_level.txt (Python 3.10's
    packages_distributions reads only that file; numpy and scikit-image ship none), read from their file lists."""
    owners = {name: list(dists) for name, dists in importlib.metadata.packages_distributions().items()}
    if modules <= owners.keys():
        return owners
    for dist in importlib.metadata.distributions():
        for file in dist.files or []:
            top = file.parts[0] if len(file.parts) > 1 else file.name.removesuffix(".py")
            if top.isidentifier() and dist.metadata["Name"] not in owners.setdefault(top, []):
                owners[top].append(dist.metadata["Name"])
    return owners


def distributions_of(modules: set[str]) -> set[str]:
    owners = _owners(modules)
    missing = sorted(m for m in modules if m not in owners)
    assert not missing, f"imported but installed by no distribution here: {missing}"
    return {canonical(d) for m in modules for d in owners[m]}


LIBRARY = {"torch", "torchvision", "numpy", "pillow", "psutil"}
COURSE_ONLY = {"matplotlib", "scikit-image", "ipywidgets", "ipython", "nvidia-ml-py"}  # plots, photos, widgets, NVML


def _library_sources() -> list[str]:
    return [p.read_text(encoding="utf-8") for p in (ROOT / "helpers").glob("*.py")]


def test_the_layers_are_there():
    extras = PROJECT["optional-dependencies"]
    assert names(PROJECT["dependencies"]) == LIBRARY  # `pip install .`: the library and nothing of the course
    assert names(extras["library"]) == {"kornia", "tqdm", "webdataset"}
    assert names(extras["library"]) | COURSE_ONLY == names(extras["course"])
    assert names(extras["jupyter"]) == {
        "jupyterlab",
        "ipykernel",
        "nbclient",
        "nbconvert",
        "nbformat",
        "mistune",
        "opencv-python-headless",
    }
    assert {"pytest", "nbval"} <= names(extras["test"]) and names(extras["browser"]) == {"playwright"}


def test_the_base_install_brings_only_the_library():
    pulled = closure(PROJECT["dependencies"])
    assert not pulled & (COURSE_ONLY | JUPYTER_SERVER | {"kornia", "tqdm", "webdataset"}), sorted(pulled & COURSE_ONLY)


def test_what_the_library_imports_anywhere_is_in_the_library_extra():
    needed = distributions_of(third_party_imports(_library_sources()))
    have = closure(PROJECT["dependencies"] + PROJECT["optional-dependencies"]["library"])
    assert needed <= have, f"imported by a library module, in no list: {sorted(needed - have)}"


def test_the_course_install_pulls_in_no_jupyter_server():
    pulled = closure(PROJECT["dependencies"] + PROJECT["optional-dependencies"]["course"])
    assert not pulled & JUPYTER_SERVER, f"the course extra pulls in {sorted(pulled & JUPYTER_SERVER)}"
    assert "ipython" in pulled and "ipywidgets" in pulled


def test_what_the_notebooks_and_helpers_import_is_in_the_course_extra():
    # the course runner and its report: their packages are the `jupyter` extra
    runner = {ROOT / "helpers" / "course" / name for name in ("runner.py", "report.py")}
    sources = [p.read_text(encoding="utf-8") for p in (ROOT / "helpers").rglob("*.py") if p not in runner]
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        sources += [c.source for c in notebook.cells if c.cell_type == "code" and not c.source.lstrip().startswith("!")]
    needed = distributions_of(third_party_imports(sources))
    course = closure(PROJECT["dependencies"] + PROJECT["optional-dependencies"]["course"])
    assert needed <= course, (
        f"imported by helpers or a notebook, missing from the course extra: {sorted(needed - course)}"
    )
    runner_needs = distributions_of(third_party_imports([p.read_text(encoding="utf-8") for p in runner]))
    jupyter = closure(
        PROJECT["dependencies"]
        + PROJECT["optional-dependencies"]["course"]
        + PROJECT["optional-dependencies"]["jupyter"]
    )
    assert runner_needs <= jupyter, f"the course runner needs {sorted(runner_needs - jupyter)} beyond its extras"


README_TABLE = "**What gets installed, in layers**"


def readme_layers(readme: str) -> dict[str, set[str]]:
    """The README's table of layers: layer ("base" for `pip install .`, else the extra's name) -> the packages its
    row lists in the "what" column."""
    lines = readme[readme.index(README_TABLE) :].splitlines()[1:]
    rows = [
        line
        for line in itertools.takewhile(lambda text: text.startswith("|") or not text.strip(), lines)
        if line.strip()
    ]
    layers: dict[str, set[str]] = {}
    for row in rows[2:]:  # below the header and the |---| line
        layer, packages = (cell.strip() for cell in row.strip("|").split("|")[:2])
        name = "base" if layer.startswith("base") else layer.strip("`")
        assert name not in layers, f"the README's table lists the layer {name} twice"
        layers[name] = {canonical(package.strip()) for package in packages.split(",") if package.strip()}
    return layers


def pyproject_layers() -> dict[str, set[str]]:
    """pyproject.toml's layers: "base" (the dependencies) and each optional-dependency group, with their packages."""
    extras = PROJECT["optional-dependencies"]
    return {"base": names(PROJECT["dependencies"]), **{extra: names(extras[extra]) for extra in extras}}


def test_the_readme_table_of_layers_lists_exactly_what_pyproject_declares():
    readme = readme_layers((ROOT / "README.md").read_text(encoding="utf-8"))
    declared = pyproject_layers()
    assert readme.keys() == declared.keys(), f"layers: README {sorted(readme)}, pyproject.toml {sorted(declared)}"
    differ = {
        layer: {
            "only in the README": sorted(readme[layer] - packages),
            "only in pyproject": sorted(packages - readme[layer]),
        }
        for layer, packages in declared.items()
        if readme[layer] != packages
    }
    assert not differ, f"the README's table of layers differs from pyproject.toml: {differ}"


def test_the_readme_table_is_read_as_written():
    table = """**What gets installed, in layers** (`pyproject.toml`):

| layer | what | for |
|---|---|---|
| base (`pip install .`) | torch, Pillow | the library |
| `course` | scikit_image,  tqdm | the notebooks, with a | in a later cell |

After the table.
| not | a row |
"""
    assert readme_layers(table) == {"base": {"torch", "pillow"}, "course": {"scikit-image", "tqdm"}}


def test_the_commands_install_the_layers_they_use():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "-e '.[course,jupyter,test]'" in makefile  # make env / make test
    assert "-e .[course,jupyter,test]" in (ROOT / "environment.yml").read_text(encoding="utf-8")
    setup = (ROOT / "tools" / "colab_setup.py").read_text(encoding="utf-8")
    assert 'extra_requirements("course"' in setup  # the Colab setup cell installs the notebooks' extra
