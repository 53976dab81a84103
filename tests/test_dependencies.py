"""Dependencies in layers: the base list is what the notebooks and `helpers` import, with no Jupyter server in it
(Colab and any Jupyter bring their own); the course runner and Lab, the tests and the browser test are extras."""

from __future__ import annotations

import ast
import importlib.metadata
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
JUPYTER_SERVER = {"jupyterlab", "jupyter-server", "notebook", "nbconvert", "nbclient", "jupyterlab-server",
                  "terminado", "jupyter-lsp", "ipykernel", "nbval", "pytest"}  # fmt: skip
OPTIONAL_IMPORTS = {"nvidia", "torchcodec", "ffcv"}  # DALI, torchcodec, FFCV: used where installed, never required


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
            pytest.fail(f"{requirement.name} is not installed here: run `make env` (or pip install -e '.[course,test]')")
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


def distributions_of(modules: set[str]) -> set[str]:
    owners = importlib.metadata.packages_distributions()
    missing = sorted(m for m in modules if m not in owners)
    assert not missing, f"imported but installed by no distribution here: {missing}"
    return {canonical(d) for m in modules for d in owners[m]}


def test_the_layers_are_there():
    extras = PROJECT["optional-dependencies"]
    assert names(extras["course"]) == {"jupyterlab", "ipykernel", "nbclient", "nbconvert", "nbformat"}
    assert {"pytest", "nbval"} <= names(extras["test"]) and names(extras["browser"]) == {"playwright"}
    assert {"torch", "torchvision", "kornia", "numpy", "pillow", "matplotlib", "tqdm", "scikit-image",
            "ipywidgets"} <= names(PROJECT["dependencies"])  # fmt: skip


def test_the_base_install_pulls_in_no_jupyter_server():
    pulled = closure(PROJECT["dependencies"])
    assert not pulled & JUPYTER_SERVER, f"the base dependencies pull in {sorted(pulled & JUPYTER_SERVER)}"
    assert "ipython" in pulled and "ipywidgets" in pulled


def test_what_the_notebooks_and_helpers_import_is_in_the_base_list():
    runner = {ROOT / "helpers" / "course" / "report.py"}  # the course runner: its packages are the `course` extra
    sources = [p.read_text(encoding="utf-8") for p in (ROOT / "helpers").rglob("*.py") if p not in runner]
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        sources += [c.source for c in notebook.cells if c.cell_type == "code" and not c.source.lstrip().startswith("!")]
    needed = distributions_of(third_party_imports(sources))
    base = closure(PROJECT["dependencies"])
    assert needed <= base, f"imported by helpers or a notebook, missing from the base list: {sorted(needed - base)}"
    runner_needs = distributions_of(third_party_imports([p.read_text(encoding="utf-8") for p in runner]))
    course = closure(PROJECT["dependencies"] + PROJECT["optional-dependencies"]["course"])
    assert runner_needs <= course, f"the course runner needs {sorted(runner_needs - course)} beyond its extra"
