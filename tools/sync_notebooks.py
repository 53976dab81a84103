"""Write the "Open in Colab" badge and the setup cell into every course notebook, from one constant.

The constant is `COURSE_REPOSITORY` under `[tool.feeding-the-gpu]` in pyproject.toml. A fork changes that one value
and runs `make sync-notebooks`. Idempotent: a notebook already in sync is not rewritten. `--check` writes nothing
and exits 1 when a notebook differs from what this tool would write (tests/tools/test_sync_notebooks.py does the same).

In each `notebooks/[0-9][0-9]_*.ipynb`:
- the first cell is a markdown cell holding only the badge, pointing at the notebook on the main branch;
- the second code cell (right after the `parameters` cell) is the setup cell: when `helpers` is not importable it
  finds the repository above the working folder or in $COURSE_COLAB_ROOT (default /content), else clones
  $COURSE_REPOSITORY_URL (default COURSE_REPOSITORY) there, then runs tools/colab_setup.py from it.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli there
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
PYPROJECT = REPO_ROOT / "pyproject.toml"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE_PREFIX = "[![Open In Colab]"
BADGE_CELL_ID = "colab-badge"
SETUP_CELL_ID = "colab-setup"
SETUP_MARKER = 'find_spec("helpers")'  # tests/test_notebooks.py looks for it in the second code cell

SETUP_CELL = """\
# Colab, or a Python without this course: find it (here or above) or clone it; add what is missing.
import importlib.util, os, pathlib, runpy, subprocess, time

if importlib.util.find_spec("helpers") is None:
    url = os.getenv("COURSE_REPOSITORY_URL", "{repository}")
    colab_root = pathlib.Path(os.getenv("COURSE_COLAB_ROOT", "/content"))
    clone = colab_root / url.rstrip("/").split("/")[-1].removesuffix(".git")
    places = [pathlib.Path.cwd(), *pathlib.Path.cwd().parents, clone]
    root = next((p for p in places if (p / "tools" / "colab_setup.py").is_file()), None)
    if root is None:
        start, root = time.perf_counter(), clone
        print(f"course setup: cloning {{url}} into {{clone}}", flush=True)
        git = ["git", "clone", "--quiet", "--depth", "1", url, str(clone)]
        done = subprocess.run(git, capture_output=True, text=True)
        if done.returncode:
            hint = f"Clone the course into {{colab_root}} yourself, or set COURSE_REPOSITORY_URL."
            error = done.stderr.strip()
            raise RuntimeError(f"course setup: {{' '.join(git)}} failed: {{error}}\\n{{hint}}")
        print(f"course setup: cloned in {{time.perf_counter() - start:.1f}} s", flush=True)
    else:
        print(f"course setup: found the course at {{root}}", flush=True)
    runpy.run_path(str(root / "tools" / "colab_setup.py"))["setup_course"](root)"""


def course_repository(pyproject: Path = PYPROJECT) -> str:
    """The repository URL every badge and setup cell is made from: COURSE_REPOSITORY in pyproject.toml."""
    with open(pyproject, "rb") as f:
        table = tomllib.load(f).get("tool", {}).get("feeding-the-gpu", {})
    url = table.get("COURSE_REPOSITORY")
    if not url:
        raise SystemExit(f"{pyproject}: set COURSE_REPOSITORY under [tool.feeding-the-gpu] (the course's GitHub URL)")
    return str(url)


def github_path(repository: str) -> str:
    """`owner/name` of a GitHub repository URL (Colab opens notebooks from GitHub by that path)."""
    match = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", repository)
    if match is None:
        raise ValueError(f"COURSE_REPOSITORY {repository!r} is not a https://github.com/OWNER/NAME URL")
    return f"{match.group(1)}/{match.group(2)}"


def badge_markdown(repository: str, notebook_name: str) -> str:
    """The badge line that opens `notebooks/<notebook_name>` of the main branch in Colab."""
    target = f"https://colab.research.google.com/github/{github_path(repository)}/blob/main/notebooks/{notebook_name}"
    return f"{BADGE_PREFIX}({BADGE_IMAGE})]({target})"


def setup_cell_source(repository: str) -> str:
    """The setup cell's code, with the repository URL written in."""
    github_path(repository)  # refuse a URL the badge could not use either
    return SETUP_CELL.format(repository=repository)


def _new_id(notebook: nbformat.NotebookNode, wanted: str) -> str:
    taken = {cell.get("id") for cell in notebook.cells}
    candidate, n = wanted, 1
    while candidate in taken:
        n += 1
        candidate = f"{wanted}-{n}"
    return candidate


def sync_notebook(notebook: nbformat.NotebookNode, *, name: str, repository: str) -> nbformat.NotebookNode:
    """Put the badge cell first and the setup cell after the parameters cell (in place); return the notebook."""
    badge = badge_markdown(repository, name)
    first = notebook.cells[0] if notebook.cells else None
    if first is not None and first.cell_type == "markdown" and first.source.startswith(BADGE_PREFIX):
        first.source = badge
    else:
        cell = nbformat.v4.new_markdown_cell(badge)
        cell["id"] = _new_id(notebook, BADGE_CELL_ID)
        notebook.cells.insert(0, cell)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    if not code or "parameters" not in code[0].metadata.get("tags", []):
        raise ValueError(f"{name}: the first code cell must be the `parameters` cell; the setup cell goes after it")
    source = setup_cell_source(repository)
    if len(code) > 1 and SETUP_MARKER in code[1].source:
        code[1].source = source
    else:
        cell = nbformat.v4.new_code_cell(source)
        cell["id"] = _new_id(notebook, SETUP_CELL_ID)
        notebook.cells.insert(notebook.cells.index(code[0]) + 1, cell)
    return notebook


def course_notebooks(folder: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The numbered course notebooks, in order."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def synced_text(path: Path, repository: str) -> tuple[str, str]:
    """(the notebook's text now, the text this tool would write)."""
    current = path.read_text(encoding="utf-8")
    notebook = nbformat.reads(current, as_version=4)
    wanted = nbformat.writes(sync_notebook(notebook, name=path.name, repository=repository)) + "\n"
    return current, wanted


def main(argv: list[str] | None = None) -> int:
    """Command line: python tools/sync_notebooks.py [--check] [notebooks...]."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a notebook is out of sync")
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/[0-9][0-9]_*.ipynb")
    args = parser.parse_args(argv)
    repository = course_repository()
    stale = []
    for path in args.notebooks or course_notebooks():
        current, wanted = synced_text(path, repository)
        if current == wanted:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(wanted, encoding="utf-8")
    verb = "out of sync" if args.check else "updated"
    print(
        f"{len(stale)} notebook(s) {verb}"
        + "".join(f"\n  {p}" for p in stale)
        + ("\nrun `make sync-notebooks`" if args.check and stale else "")
    )
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
