"""Write the minutes of a `make course` run into results/cpu-run.md's "Time per notebook" table and each notebook's "What it
costs" line, from the run's `reports/runs.json` (tests/test_notebook_costs.py keeps the two equal), and each
notebook's estimated cost in the `full` profile on a T4 and an H200, labelled as an estimate, from
results/estimates/notebook-costs-full.json (which says how each was estimated) until a GPU run measures them.

    python tools/notebook_costs.py reports/runs.json --describe "profile `cpu`, commit `abc1234`, 2 cores of an AMD EPYC, a busy machine"
    python tools/notebook_costs.py            # the estimate lines only
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parents[1]
ESTIMATES = ROOT / "results" / "estimates" / "notebook-costs-full.json"
TIMES_PAGE = "results/cpu-run.md"  # the last measured run, with its "Time per notebook" table
_QUOTE = re.compile(r"this notebook took about \d+\.\d min")
_ESTIMATE = re.compile(r"\n\nEstimated for the `full` profile, not measured: [^\n]*")
DEVICES = {"T4": "a T4", "H200": "an H200"}  # the estimates file's devices, as the sentence names them


def estimated_minutes(payload: dict[str, Any]) -> dict[str, dict[str, float]]:
    """{notebook file: {device: minutes}} from an estimates file: budgets x overrun + the unbudgeted seconds."""
    return {
        name: {
            device: round((entry["budgets_s"] * payload["overrun"] + entry[device]["other_s"]) / 60, 1)
            for device in DEVICES
        }
        for name, entry in payload["notebooks"].items()
    }


def estimate_line(minutes: dict[str, float], source: str = "results/estimates/notebook-costs-full.json") -> str:
    """The sentence a notebook's "What it costs" ends with: its estimated minutes, labelled as estimates."""
    on = ", ".join(f"{minutes[device]:.1f} min on {named}" for device, named in DEVICES.items())
    return f"Estimated for the `full` profile, not measured: {on} (`{source}` says how)."


def minutes_by_notebook(runs: dict) -> dict[str, tuple[float, str]]:
    """{"02": (seconds, "4.1")} for every notebook the run finished."""
    return {r["name"][:2]: (r["seconds"], f"{r['seconds'] / 60:.1f}") for r in runs["runs"] if r["seconds"] is not None}


def update_times_page(text: str, minutes: dict[str, tuple[float, str]], describe: str | None) -> str:
    """The results page with its "Time per notebook" rows (and, given `describe`, the run it names) replaced."""
    head, section = text.split("### Time per notebook", 1)
    body, rest = (section.split("\n#", 1) + [""])[:2]
    for number, (seconds, mins) in minutes.items():
        body = re.sub(
            rf"^\| {number} \| \d+ \| \d+\.\d \|$", f"| {number} | {seconds:.0f} | {mins} |", body, flags=re.M
        )
    if describe:
        body = re.sub(r"the run above \([^)]*\)", f"the run above ({describe})", body, count=1, flags=re.S)
    return head + "### Time per notebook" + body + ("\n#" + rest if rest else "")


def update_notebook(path: Path, mins: str | None, estimate: str | None = None) -> bool:
    """Rewrite the notebook's "took about N min" quote (given `mins`) and its estimate sentence (given `estimate`,
    a paragraph of its own at the end of "What it costs"); True when it changed."""
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if c.cell_type == "markdown" and "**What it costs.**" in c.source)
    new = cell.source if mins is None else _QUOTE.sub(f"this notebook took about {mins} min", cell.source)
    if estimate is not None:
        new = _ESTIMATE.sub("", new).rstrip("\n") + "\n\n" + estimate
    if new == cell.source:
        return False
    cell.source = new
    nbformat.write(notebook, path)
    return True


def main(argv: list[str] | None = None) -> None:
    """Update results/cpu-run.md and the notebooks from one runs.json, and the notebooks' estimate sentences."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="?", help="reports/runs.json of a finished make course (optional)")
    parser.add_argument("--describe", help="replaces the run's description in the table's first sentence")
    parser.add_argument("--estimates", type=Path, default=ESTIMATES, help="the estimates file (default: %(default)s)")
    args = parser.parse_args(argv)
    minutes = minutes_by_notebook(json.loads(args.runs.read_text())) if args.runs else {}
    if args.runs:
        page = ROOT / TIMES_PAGE
        page.write_text(update_times_page(page.read_text(), minutes, args.describe))
    estimates = estimated_minutes(json.loads(args.estimates.read_text())) if args.estimates.is_file() else {}
    where = args.estimates.resolve()
    source = where.relative_to(ROOT).as_posix() if where.is_relative_to(ROOT) else where.as_posix()
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        mins = minutes[path.name[:2]][1] if path.name[:2] in minutes else None
        estimate = estimate_line(estimates[path.name], source) if path.name in estimates else None
        if update_notebook(path, mins, estimate):
            print(f"{path.name}: " + "; ".join(filter(None, [mins and f"about {mins} min", estimate])))


if __name__ == "__main__":
    main()
