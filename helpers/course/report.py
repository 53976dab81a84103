"""The course run's report: each executed notebook saved with its HTML (its progress bars at their final state), and
`summary.md`, `index.html` and `runs.json` (environment, provenance, one row per notebook, the results the notebooks
recorded) over the runs so far. runner.py executes the notebooks and calls these after each one."""

from __future__ import annotations

import html
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import mistune
import nbformat
from nbconvert import HTMLExporter

from ..env import format_environment_report
from .results import git_commit, load_summary


@dataclass
class NotebookRun:
    """What happened when one notebook ran: time, code cells executed, where the outputs are, and any error."""

    name: str
    seconds: float
    code_cells: int
    executed_cells: int
    executed_path: str
    html_path: str
    error: str | None = None
    interrupted: bool = False  # stopped by Ctrl-C or SIGTERM, not by its own fault
    load: dict[str, Any] | None = None  # the load meter over the run: CPU other processes used meanwhile

    @property
    def ok(self) -> bool:
        """True when every code cell ran without an error."""
        return self.error is None and self.executed_cells == self.code_cells and self.code_cells > 0

    @property
    def status(self) -> str:
        """The report's status cell: ok, FAILED with the reason, or interrupted."""
        if self.interrupted:
            return self.error or "interrupted"
        return "ok" if self.ok else f"FAILED: {self.error or 'not every cell ran'}"


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def final_progress_text(notebook: Any) -> int:
    """Give each tqdm widget output the text of its final state (what the saved widget state holds), in place of
    the "0%" it was displayed with: GitHub, the HTML report and any viewer without widgets show that text. A bar
    closed with leave=False (hidden in a live notebook) gets no text. Returns how many outputs it rewrote."""
    state = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    rewritten = 0
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            box = state.get(view["model_id"], {}) if view else {}
            parts = [
                state.get(child.removeprefix("IPY_MODEL_"), {}) for child in box.get("state", {}).get("children", [])
            ]
            if [p.get("model_name") for p in parts] != ["HTMLModel", "FloatProgressModel", "HTMLModel"]:
                continue  # not a tqdm bar (an HBox of label, bar, label)
            layout = state.get(box["state"].get("layout", "").removeprefix("IPY_MODEL_"), {}).get("state", {})
            if layout.get("visibility") == "hidden":  # a leave=False bar, hidden when it closed: no text either
                output["data"]["text/plain"] = ""
                rewritten += 1
                continue
            left, bar, right = (p["state"] for p in parts)
            share = bar.get("value", 0) / bar["max"] if bar.get("max") else 0.0
            drawn = "█" * round(10 * share) + " " * (10 - round(10 * share))
            text = f"{left.get('value', '')}|{drawn}|{right.get('value', '')}".replace("\u2007", " ")
            output["data"]["text/plain"] = html.unescape(text)
            rewritten += 1
    return rewritten


def write_copies(notebook: Any, name: str, out_dir: Path) -> tuple[Path, Path]:
    """Write an executed notebook (its progress bars at their final text) and its HTML into `out_dir` as `name` and
    `name` with .html; return the two paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    executed_path = out_dir / name
    final_progress_text(notebook)
    nbformat.write(notebook, executed_path)
    body, _ = HTMLExporter().from_notebook_node(notebook)
    html_path = executed_path.with_suffix(".html")
    html_path.write_text(body, encoding="utf-8")
    return executed_path, html_path


def load_cell(load: dict[str, Any] | None) -> str:
    """A report cell for a notebook's load meter: '0.8 of 2 cores (busy)'."""
    if not load:
        return ""
    return f"{load['other_cores']:.1f} of {load['cores']} cores" + (" (busy)" if load["busy"] else "")


def _rows(runs: list[NotebookRun], out_dir: Path, pending: Sequence[str]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for run in runs:
        link = os.path.relpath(run.html_path, out_dir)
        rows.append(
            (
                run.name,
                f"{run.seconds:.1f}",
                f"{run.executed_cells}/{run.code_cells}",
                run.status,
                link,
                load_cell(run.load),
            )
        )
    rows += [(name, "", "", "not run", "", "") for name in pending]
    return rows


def provenance_line(runs: list[NotebookRun], commit: dict[str, Any]) -> str:
    """Where the run came from and how busy the machine was: commit (dirty or not) and the load meter's summary."""
    where = (
        f"commit {commit['commit'][:12]}" + (" with uncommitted changes" if commit["dirty"] else "")
        if (commit["commit"])
        else "not a git checkout"
    )
    load = load_summary([r.load for r in runs])
    if load is None:
        return where
    busy = [r.name for r in runs if r.load and r.load["busy"]]
    return where + (
        f"; averaged over each notebook, other processes used up to {load['other_cores_max']:.1f} of {load['cores']} "
        "cores (single measurements inside a notebook may read more)"
        + (f" (busy during {', '.join(busy)}: their numbers include that load)" if busy else "")
    )


_MARKDOWN = mistune.create_markdown(escape=True, plugins=["table"])


def _markdown_html(text: str) -> str:
    """A recorded result (a markdown table under its bold title, or a verdict's text) as HTML, its text escaped."""
    return str(_MARKDOWN(text))


def _html_link(name: str, link: str) -> str:
    return f"<a href='{html.escape(link)}'>{html.escape(name)}</a>" if link else html.escape(name)


def write_report(
    runs: list[NotebookRun],
    environment: dict,
    profile: str,
    sources: list[str],
    out_dir: Path,
    results: list[dict[str, str]] | None = None,
    *,
    pending: Sequence[str] = (),
    progress: str = "finished",
) -> tuple[Path, Path]:
    """Write `summary.md`, `index.html` and `runs.json` (environment, profile, data, how far the run got, notebooks,
    recorded results, notebooks not run yet); return the summary's and the page's paths."""
    rows = _rows(runs, out_dir, pending)
    env_line = format_environment_report(environment)
    commit = git_commit()
    origin = provenance_line(runs, commit)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    md = [
        "# Feeding the GPU: course run",
        "",
        f"- when: {stamp}",
        f"- run: {progress}",
        f"- profile: **{profile}**" + (" (smoke numbers are not measurements)" if profile == "smoke" else ""),
        f"- environment: {env_line}",
        f"- provenance: {origin}",
        *[f"- data: {s}" for s in sources],
        "",
        "| notebook | seconds | code cells run | status | other processes' CPU |",
        "|---|---:|---:|---|---|",
        *[f"| {f'[{n}]({link})' if link else n} | {s} | {c} | {st} | {ld} |" for n, s, c, st, link, ld in rows],
        "",
    ]
    for block in results or []:
        md += [f"## {block['title']}", "", block["text"], ""]
    summary = out_dir / "summary.md"
    summary.write_text("\n".join(md), encoding="utf-8")
    esc = html.escape
    table = "".join(
        f"<tr><td>{_html_link(n, link)}</td><td>{s}</td><td>{c}</td><td>{esc(st)}</td><td>{esc(ld)}</td></tr>"
        for n, s, c, st, link, ld in rows
    )
    page = (
        "<!doctype html><meta charset='utf-8'><title>Feeding the GPU: course run</title>"
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}td,th{padding:.3em .8em;"
        "border-bottom:1px solid #ddd;text-align:left}</style>"
        "<h1>Feeding the GPU: course run</h1>"
        f"<p>When: {esc(stamp)}<br>Run: {esc(progress)}<br>Profile: <b>{esc(profile)}</b><br>"
        f"Environment: {esc(env_line)}<br>Provenance: {esc(origin)}</p>"
        + "".join(f"<p>Data: {esc(s)}</p>" for s in sources)
        + "<table><tr><th>notebook</th><th>seconds</th><th>code cells run</th><th>status</th>"
        "<th>other processes' CPU</th></tr>"
        + table
        + "</table>"
        + "".join(f"<h2>{esc(b['title'])}</h2>{_markdown_html(b['text'])}" for b in results or [])
    )
    index = out_dir / "index.html"
    index.write_text(page, encoding="utf-8")
    provenance = {
        **commit,
        "profile": profile,
        "device": environment.get("device"),
        "load": load_summary([r.load for r in runs]),
    }
    payload = {"provenance": provenance, "runs": [asdict(r) for r in runs]}
    (out_dir / "runs.json").write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return summary, index
