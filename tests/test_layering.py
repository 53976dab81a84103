"""The package's two layers: library modules copy one at a time (each imports only the siblings its docstring names,
and shows its use in an example that runs), the library never imports the course layer, and imports sit at module
level except optional dependencies."""

from __future__ import annotations

import ast
import doctest
import re
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
# Every module beside __init__.py is the library (what `pip install .` installs as feeding_the_gpu): the course's
# command lines live in the course layer (`python -m helpers.course.train|bench`).
LIBRARY = sorted(p for p in HELPERS.glob("*.py") if p.name != "__init__.py")
COURSE = sorted((HELPERS / "course").rglob("*.py"))  # with its packages (helpers/course/verdicts/)
# Imports allowed inside a function: optional dependencies that most users do not have, and (per module) packages
# that only one function of a library module needs, so that copying the module does not require them.
OPTIONAL_IMPORTS = {"nvidia.dali", "cv2"}  # cv2: lesson 05 measures OpenCV's resize where OpenCV is installed
OPTIONAL_IN = {"sr_data.py": {"kornia.augmentation"}, "timeline.py": {"pynvml"}}
MODULE_LINES = 400  # a module of the library or of the course past this should be split by concern
LIBRARY_FUNCTION_LINES = 60  # ... and a function past this by job (or say in a comment why it is one piece)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def declared_siblings(path: Path) -> set[str] | None:
    """The sibling modules a library module's docstring says to copy with it (None when it does not say)."""
    doc = ast.get_docstring(_tree(path)) or ""
    if re.search(r"^Copy alone\b", doc, flags=re.M):
        return set()
    match = re.search(r"^Copy with: (.+?)(?:\n\n|\Z)", doc, flags=re.M | re.S)
    if match is None:
        return None
    return {name[:-3] for name in re.findall(r"\b(\w+\.py)\b", match.group(1))}


def sibling_imports(path: Path) -> set[str]:
    """Modules of `helpers` that a module imports (relative `from .x import` or absolute `helpers.x`)."""
    found = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:
                found.update(alias.name for alias in node.names)
            elif node.level > 1 or (node.module or "").startswith("helpers"):
                found.add(f"<outside the library: {'.' * node.level}{node.module or ''}>")
        elif isinstance(node, ast.Import):
            found.update(f"<outside the library: {a.name}>" for a in node.names if a.name.startswith("helpers"))
    return found


def closure(name: str) -> set[str]:
    """Every sibling `name` needs, directly or through the siblings it imports."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        for sibling in sibling_imports(HELPERS / f"{todo.pop()}.py") - seen:
            seen.add(sibling)
            if (HELPERS / f"{sibling}.py").is_file():
                todo.append(sibling)
    return seen


def test_the_library_and_the_course_exist():
    names = {p.stem for p in LIBRARY}
    assert {
        "images",
        "download",
        "cifar",
        "sr_data",
        "sr_cache",
        "loading",
        "augment",
        "models",
        "metrics",
        "step",
        "checkpoint",
        "trainer",
        "distributed",
        "measure",
    } <= names
    assert {"profiles", "data", "standins", "baselines", "ladder", "recipes", "plots", "runner", "report"} <= {
        p.stem for p in COURSE
    }
    assert {"text", "ladder", "mixed_precision"} <= {p.stem for p in COURSE if p.parent.name == "verdicts"}


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: p.name)
def test_library_module_names_exactly_the_siblings_it_needs(path):
    declared = declared_siblings(path)
    assert declared is not None, f"{path.name}: its docstring must say 'Copy alone' or 'Copy with: a.py, b.py'"
    direct = sibling_imports(path)
    assert not {d for d in direct if d.startswith("<")}, f"{path.name} imports outside the library: {direct}"
    needed = closure(path.stem)
    assert needed == declared, (
        f"{path.name}: its docstring names {sorted(declared)} to copy with it, but it needs {sorted(needed)}"
    )


@pytest.mark.parametrize("path", LIBRARY + COURSE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_imports_sit_at_module_level(path):
    inside = []
    for function in ast.walk(_tree(path)):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                    own = OPTIONAL_IN.get(path.name, set()) if path.parent == HELPERS else set()
                    allowed = OPTIONAL_IMPORTS | own
                    inside += [n for n in names if not any(n.startswith(o) for o in allowed)]
    assert not inside, f"{path.name}: imports inside functions: {inside}; move them to the top of the module"


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: p.name)
def test_library_modules_are_short_and_their_functions_shorter(path):
    source = path.read_text(encoding="utf-8")
    assert len(source.splitlines()) <= MODULE_LINES, f"{path.name}: over {MODULE_LINES} lines; split it by concern"
    lines = source.splitlines()
    for node in ast.walk(_tree(path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            reason = any("one piece" in line for line in lines[node.lineno - 1 : node.end_lineno])
            assert length <= LIBRARY_FUNCTION_LINES or reason, f"{path.name}: {node.name} is {length} lines"


@pytest.mark.parametrize("path", COURSE, ids=lambda p: p.relative_to(HELPERS).as_posix())
def test_course_modules_are_short(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MODULE_LINES, (
        f"{path.relative_to(HELPERS)}: {lines} lines, over {MODULE_LINES}; split it by concern"
    )


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: p.name)
def test_library_reads_no_course_settings(path):
    source = path.read_text(encoding="utf-8")
    assert "COURSE_" not in source, f"{path.name}: COURSE_* settings are the course's"
    assert "resolve_profile" not in source and "PROFILE" not in source, f"{path.name}: profiles are the course's"


def docstring_examples(path: Path) -> list[doctest.Example]:
    """The `>>>` examples of a module's docstring, as doctest reads them."""
    return doctest.DocTestParser().get_examples(ast.get_docstring(_tree(path)) or "")


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: p.name)
def test_library_module_docstring_shows_its_use_in_an_example_that_runs(path):
    """`make test` runs these (pytest --doctest-modules over helpers/). They use the module's own names, not the
    package's, so that a copy of the file, in a package of any name, carries a usage that still runs."""
    examples = docstring_examples(path)
    assert examples, f"{path.name}: its docstring has no `>>>` example of its use"
    assert any(example.want for example in examples), f"{path.name}: no example shows the output it checks"
    imports = [e.source.strip() for e in examples if re.search(r"\b(from|import)\s+(helpers|\.)", e.source)]
    assert not imports, f"{path.name}: the example imports the package ({imports}); use the module's own names"
