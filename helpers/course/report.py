"""Running the course: execute every notebook top to bottom in one profile and write executed copies and an HTML report."""

from __future__ import annotations

import argparse
import html
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbconvert import HTMLExporter
from tqdm.auto import tqdm

from ..env import environment_report, format_environment_report
from .data import prepare_bsds300, prepare_cifar10
from .profiles import PROFILE_ENV_VAR, resolve_profile_name
from .results import RESULTS_ENV_VAR, read_results

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
REPORTS_DIR = REPO_ROOT / "reports"


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

    @property
    def ok(self) -> bool:
        """True when every code cell ran without an error."""
        return self.error is None and self.executed_cells == self.code_cells and self.code_cells > 0


def course_notebooks(folder: Path = NOTEBOOKS_DIR) -> list[Path]:
    """Return the numbered course notebooks in order."""
    return sorted(p for p in folder.glob("[0-9][0-9]_*.ipynb"))


def _current_env_kernel_manager():
    """A kernel manager that starts ipykernel with this interpreter, whatever kernels the user has registered."""
    class CurrentEnvSpecs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            return KernelSpec(argv=argv, display_name="Python (course)", language="python")

    return KernelManager(kernel_spec_manager=CurrentEnvSpecs(), kernel_name="python3")


def execute_notebook(path: Path, out_dir: Path, cell_timeout: int = 1800) -> NotebookRun:
    """Execute one notebook in a fresh kernel (cwd = its folder); write the executed copy and its HTML to `out_dir`."""
    notebook = nbformat.read(path, as_version=4)
    kernel_manager = _current_env_kernel_manager()
    client = NotebookClient(
        notebook,
        km=kernel_manager,
        timeout=cell_timeout,
        resources={"metadata": {"path": str(path.parent)}},
    )
    error = None
    start = time.perf_counter()
    try:
        client.execute()
    except CellExecutionError as exc:
        error = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
    except Exception as exc:  # noqa: BLE001 (a dead kernel or timeout is reported, and the next notebook still runs)
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if kernel_manager.has_kernel:  # nbclient leaves a kernel it did not start running: stop it before the next
            kernel_manager.shutdown_kernel(now=True)
    seconds = time.perf_counter() - start
    code = [c for c in notebook.cells if c.cell_type == "code"]
    executed = sum(1 for c in code if c.get("execution_count"))
    out_dir.mkdir(parents=True, exist_ok=True)
    executed_path = out_dir / path.name
    nbformat.write(notebook, executed_path)
    body, _ = HTMLExporter().from_notebook_node(notebook)
    html_path = out_dir / f"{path.stem}.html"
    html_path.write_text(body, encoding="utf-8")
    return NotebookRun(path.stem, seconds, len(code), executed, str(executed_path), str(html_path), error)


def _rows(runs: list[NotebookRun], out_dir: Path) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for run in runs:
        status = "ok" if run.ok else f"FAILED: {run.error or 'not every cell ran'}"
        link = os.path.relpath(run.html_path, out_dir)
        rows.append((run.name, f"{run.seconds:.1f}", f"{run.executed_cells}/{run.code_cells}", status, link))
    return rows


def write_report(
    runs: list[NotebookRun],
    environment: dict,
    profile: str,
    sources: list[str],
    out_dir: Path,
    results: list[dict[str, str]] | None = None,
) -> tuple[Path, Path]:
    """Write `summary.md` and `index.html` (environment, profile, data, notebooks, recorded results); return paths."""
    rows = _rows(runs, out_dir)
    env_line = format_environment_report(environment)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    md = [
        "# Feeding the GPU: course run",
        "",
        f"- when: {stamp}",
        f"- profile: **{profile}**" + (" (smoke numbers are not measurements)" if profile == "smoke" else ""),
        f"- environment: {env_line}",
        *[f"- data: {s}" for s in sources],
        "",
        "| notebook | seconds | code cells run | status |",
        "|---|---:|---:|---|",
        *[f"| [{n}]({link}) | {s} | {c} | {st} |" for n, s, c, st, link in rows],
        "",
    ]
    for block in results or []:
        md += [f"## {block['title']}", "", block["text"], ""]
    summary = out_dir / "summary.md"
    summary.write_text("\n".join(md), encoding="utf-8")
    esc = html.escape
    table = "".join(
        f"<tr><td><a href='{esc(link)}'>{esc(n)}</a></td><td>{s}</td><td>{c}</td><td>{esc(st)}</td></tr>"
        for n, s, c, st, link in rows
    )
    page = (
        "<!doctype html><meta charset='utf-8'><title>Feeding the GPU: course run</title>"
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}td,th{padding:.3em .8em;"
        "border-bottom:1px solid #ddd;text-align:left}</style>"
        "<h1>Feeding the GPU: course run</h1>"
        f"<p>When: {esc(stamp)}<br>Profile: <b>{esc(profile)}</b><br>Environment: {esc(env_line)}</p>"
        + "".join(f"<p>Data: {esc(s)}</p>" for s in sources)
        + "<table><tr><th>notebook</th><th>seconds</th><th>code cells run</th><th>status</th></tr>"
        + table
        + "</table>"
        + "".join(f"<h2>{esc(b['title'])}</h2><pre>{esc(b['text'])}</pre>" for b in results or [])
    )
    index = out_dir / "index.html"
    index.write_text(page, encoding="utf-8")
    (out_dir / "runs.json").write_text(json.dumps([asdict(r) for r in runs], indent=2), encoding="utf-8")
    return summary, index


def run_course(profile: str = "auto", out_dir: Path = REPORTS_DIR, notebooks: list[Path] | None = None) -> int:
    """Prepare the data, execute every notebook in `profile`, write the report; return a process exit code."""
    name = resolve_profile_name(profile)
    os.environ[PROFILE_ENV_VAR] = name  # every notebook's kernel inherits it
    out_dir.mkdir(parents=True, exist_ok=True)
    results_file = out_dir / "results.jsonl"
    results_file.unlink(missing_ok=True)
    os.environ[RESULTS_ENV_VAR] = str(results_file)
    environment = environment_report()
    print(f"profile: {name}\nenvironment: {format_environment_report(environment)}")
    sources = [prepare_bsds300().describe(), prepare_cifar10().describe()]
    for line in sources:
        print(f"data: {line}")
    notebooks = notebooks or course_notebooks()
    runs = []
    for path in tqdm(notebooks, desc="notebooks", unit="nb"):
        run = execute_notebook(path, out_dir / "notebooks")
        tqdm.write(f"{run.name}: {'ok' if run.ok else 'FAILED (' + str(run.error) + ')'} in {run.seconds:.1f} s")
        runs.append(run)
    summary, index = write_report(runs, environment, name, sources, out_dir, read_results(results_file))
    print(f"\nexecuted notebooks: {out_dir / 'notebooks'}\nreport: {index}\nsummary: {summary}")
    failed = [r.name for r in runs if not r.ok]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line: python -m helpers.course.report [--profile auto|smoke|cpu|full] [--out reports]."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", default="auto", help="auto (full on CUDA, else cpu), smoke, cpu or full")
    parser.add_argument("--out", type=Path, default=REPORTS_DIR, help="folder for the executed notebooks and report")
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: all, in order)")
    args = parser.parse_args(argv)
    return run_course(args.profile, args.out, args.notebooks or None)


if __name__ == "__main__":
    raise SystemExit(main())
