"""Write the minutes of a `make course` run into the README's "Time per notebook" table and each notebook's
"What it costs" line, from the run's `reports/runs.json` (tests/test_notebook_costs.py keeps the two equal).

    python tools/notebook_costs.py reports/runs.json --describe "profile `cpu`, commit `abc1234`, 2 cores of an AMD EPYC, a busy machine"
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
_QUOTE = re.compile(r"this notebook took about \d+\.\d min")


def minutes_by_notebook(runs: dict) -> dict[str, tuple[float, str]]:
    """{"02": (seconds, "4.1")} for every notebook the run finished."""
    return {r["name"][:2]: (r["seconds"], f"{r['seconds'] / 60:.1f}") for r in runs["runs"] if r["seconds"] is not None}


def update_readme(text: str, minutes: dict[str, tuple[float, str]], describe: str | None) -> str:
    """The README with its "Time per notebook" rows (and, given `describe`, the run it names) replaced."""
    head, section = text.split("### Time per notebook", 1)
    body, rest = (section.split("\n#", 1) + [""])[:2]
    for number, (seconds, mins) in minutes.items():
        body = re.sub(
            rf"^\| {number} \| \d+ \| \d+\.\d \|$", f"| {number} | {seconds:.0f} | {mins} |", body, flags=re.M
        )
    if describe:
        body = re.sub(r"the run above \([^)]*\)", f"the run above ({describe})", body, count=1, flags=re.S)
    return head + "### Time per notebook" + body + ("\n#" + rest if rest else "")


def update_notebook(path: Path, mins: str) -> bool:
    """Rewrite the notebook's "took about N min" quote; True when it changed."""
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if c.cell_type == "markdown" and "**What it costs.**" in c.source)
    new = _QUOTE.sub(f"this notebook took about {mins} min", cell.source)
    if new == cell.source:
        return False
    cell.source = new
    nbformat.write(notebook, path)
    return True


def main() -> None:
    """Update the README and the notebooks from one runs.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="reports/runs.json of a finished make course")
    parser.add_argument("--describe", help="replaces the run's description in the table's first sentence")
    args = parser.parse_args()
    minutes = minutes_by_notebook(json.loads(args.runs.read_text()))
    readme = ROOT / "README.md"
    readme.write_text(update_readme(readme.read_text(), minutes, args.describe))
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        if path.name[:2] in minutes and update_notebook(path, minutes[path.name[:2]][1]):
            print(f"{path.name}: about {minutes[path.name[:2]][1]} min")


if __name__ == "__main__":
    main()
