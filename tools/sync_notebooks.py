"""Write the "Open in Colab" badge and the setup cell into every course notebook, from one constant.

The constant is `COURSE_REPOSITORY` under `[tool.feeding-the-gpu]` in pyproject.toml. A fork changes that one value
and runs `make sync-notebooks`. Idempotent: a file already in sync is not rewritten. `--check` writes nothing
and exits 1 when a file differs from what this tool would write (tests/tools/test_sync_notebooks.py does the same).

In each `notebooks/[0-9][0-9]_*.ipynb`:
- the first cell is a markdown cell holding only the badge, pointing at the notebook on the main branch;
- the second code cell (right after the `parameters` cell) is the three-line setup cell: when `helpers` is not
  importable it downloads tools/get_course.py from the repository's main branch and runs it (that file finds the
  course above the working folder or in $COURSE_COLAB_ROOT, default /content, else clones $COURSE_REPOSITORY_URL
  there, then runs tools/colab_setup.py from it).
And in tools/get_course.py: COURSE_REPOSITORY as the repository it clones by default.
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
SETUP_MARKER = "import helpers"  # tests/test_notebooks.py looks for it in the second code cell
OLD_SETUP_MARKER = 'find_spec("helpers")'  # the setup cell of 2026-11, replaced in place
GET_COURSE = REPO_ROOT / "tools" / "get_course.py"
GET_COURSE_DEFAULT = re.compile(r'(def _get_course\(repository: str = ")([^"]*)(")')

# Three lines that ruff keeps as they are (`# fmt: skip`; E701 is allowed in notebooks for them): when `helpers` is
# not importable, download tools/get_course.py from the course's repository and run it. That file holds the logic.
SETUP_CELL = """\
URL = "{script_url}"
try: import helpers  # Colab, or a Python without it: URL gets the course  # noqa: F401  # fmt: skip
except ImportError: exec(__import__("urllib.request").request.urlopen(URL).read())  # fmt: skip"""


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


def get_course_url(repository: str) -> str:
    """Where a setup cell downloads tools/get_course.py from: the file on the repository's main branch."""
    return f"https://raw.githubusercontent.com/{github_path(repository)}/main/tools/get_course.py"


def setup_cell_source(repository: str, *, script_url: str | None = None) -> str:
    """The setup cell's code, downloading get_course.py from `repository` (or from `script_url`: the tests' and the
    Colab simulation's local copy)."""
    return SETUP_CELL.format(script_url=script_url or get_course_url(repository))


def get_course_text(repository: str, text: str) -> str:
    """tools/get_course.py's text with `repository` as the repository it clones by default."""
    if GET_COURSE_DEFAULT.search(text) is None:
        raise ValueError(f"{GET_COURSE}: no `def _get_course(repository: str = ...)` line to write the repository in")
    return GET_COURSE_DEFAULT.sub(lambda m: m.group(1) + repository + m.group(3), text, count=1)


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
    if len(code) > 1 and (SETUP_MARKER in code[1].source or OLD_SETUP_MARKER in code[1].source):
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
    pairs = [(path, *synced_text(path, repository)) for path in args.notebooks or course_notebooks()]
    current = GET_COURSE.read_text(encoding="utf-8")
    pairs.append((GET_COURSE, current, get_course_text(repository, current)))
    for path, current, wanted in pairs:
        if current == wanted:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(wanted, encoding="utf-8")
    verb = "out of sync" if args.check else "updated"
    print(
        f"{len(stale)} file(s) {verb}"
        + "".join(f"\n  {p}" for p in stale)
        + ("\nrun `make sync-notebooks`" if args.check and stale else "")
    )
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
