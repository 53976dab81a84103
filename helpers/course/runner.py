"""Running the course: execute every notebook top to bottom in one profile and write executed copies and a report
(`python -m helpers.course.runner`, what `make course` runs; the report's pages are written by report.py).

Each notebook runs with nbclient in a worker thread (its own asyncio loop and kernel) while the main thread watches:
every POLL_S seconds it checks the kernel process (exited, killed, or a zombie whose main thread ended while other
threads keep the process and its heartbeat alive, which nbclient never reports) and the notebook's wall time against
the profile's `notebook_limit_s`. On a dead kernel or an overrun it kills the kernel's process group, records why and
at which cell, and goes on to the next notebook. Ctrl-C or SIGTERM does the same to the running notebook, then writes
the report and exits with 130 or 143. The report (`summary.md`, `index.html`, `runs.json`) is rewritten after every
notebook, so a run killed outright still leaves one of what finished.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from tqdm.auto import tqdm

from ..env import environment_report, format_environment_report
from ..loadmeter import LoadMeter
from .data import prepare_bsds300, prepare_cifar10
from .profiles import PROFILE_ENV_VAR, resolve_profile
from .report import NotebookRun, write_copies, write_report
from .results import RESULTS_ENV_VAR, read_results

REPO_ROOT = Path(__file__).resolve().parents[2]


NOTEBOOKS_DIR = REPO_ROOT / "notebooks"


REPORTS_DIR = REPO_ROOT / "reports"


POLL_S = 0.5  # how often the runner looks at the kernel process and the clock while a notebook runs


STOP_GRACE_S = 10.0  # how long a stopped notebook's worker thread gets to shut its kernel down before it is abandoned


# How long nbclient keeps reading a cell's IOPub messages after the cell's reply. nbclient's default, 4 s, drops
# what is still queued then: a busy runner falls behind a cell's output, and the last messages are the ones lost,
# among them a progress bar's final widget updates (the saved widget state, and its text, then read an earlier
# state, often the 0% it was displayed with). The kernel sends its idle status after them, so waiting costs nothing.
IOPUB_TIMEOUT_S = 120


class CourseInterrupted(Exception):
    """Ctrl-C or SIGTERM reached the runner; `run` is the notebook it stopped, if one was running."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        self.run: NotebookRun | None = None
        super().__init__(f"interrupted by {self.signal_name}")


def course_notebooks(folder: Path = NOTEBOOKS_DIR) -> list[Path]:
    """Return the numbered course notebooks in order."""
    return sorted(p for p in folder.glob("[0-9][0-9]_*.ipynb"))


def _current_env_kernel_manager() -> AsyncKernelManager:
    """A kernel manager that starts ipykernel with this interpreter, whatever kernels the user has registered."""

    class CurrentEnvSpecs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            return KernelSpec(argv=argv, display_name="Python (course)", language="python")

    return AsyncKernelManager(kernel_spec_manager=CurrentEnvSpecs(), kernel_name="python3")


def _process_state(pid: int) -> str | None:
    """The state letter in /proc/<pid>/stat (R, S, D, Z...), or None where there is no such entry."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def kernel_death(process: subprocess.Popen) -> str | None:
    """Why the kernel process is dead ("signal 9 (SIGKILL)", "exit code 1", "a zombie ..."), or None while it lives."""
    code = process.poll()  # reaps a kernel that exited or was killed
    if code is not None:
        if code >= 0:
            return f"exit code {code}"
        try:
            return f"signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"signal {-code}"
    if _process_state(process.pid) in {"Z", "X"}:  # the main thread ended; other threads keep the process
        return "a zombie: its main thread ended but the process did not exit"
    return None


def _kill_kernel(process: subprocess.Popen | None, group: int | None) -> None:
    """SIGKILL the kernel and everything it started (its process group, recorded at its start), and reap it."""
    if group is not None and group != os.getpgrp():  # never our own group: that would kill the runner
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass  # the kernel and its children are gone already
    if process is not None and process.poll() is None:  # a reaped pid may belong to someone else by now
        try:
            process.kill()
            process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


@dataclass
class _Execution:
    """What the worker thread and the watching main thread share about one notebook's execution."""

    notebook: Any
    cwd: Path
    cell_timeout: int | None
    process: subprocess.Popen | None = None  # the kernel, once started
    group: int | None = None  # its process group (the kernel leads its own session, with any workers it starts)
    cell: int = 0  # 1-based position of the cell running now (0: none yet)
    cells_run: int = 0  # code cells that ran to their end (with or without an error)
    error: str | None = None
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task | None = None
    stop: bool = False  # the main thread wants the notebook stopped
    shutting_down: bool = False  # the notebook is over and the worker is stopping its kernel: not a death
    # Set when the worker thread ends. The main thread waits on this, never in Thread.join: on Python 3.11 an
    # exception raised by a signal handler inside join() marks the still-running thread as stopped.
    done: threading.Event = field(default_factory=threading.Event)

    def where(self) -> str:
        """Where the notebook was: 'at cell 3 of 7' (cells counted like the notebook shows them, from 1)."""
        total = len(self.notebook.cells)
        return f"at cell {self.cell} of {total}" if self.cell else "before its first cell ran"


async def _execute(state: _Execution) -> None:
    """Start a kernel, run every cell with nbclient, and always shut the kernel down; the outcome goes in `state`."""
    state.loop, state.task = asyncio.get_running_loop(), asyncio.current_task()
    kernel_manager = _current_env_kernel_manager()
    client = None
    try:
        await kernel_manager.start_kernel(cwd=str(state.cwd))
        # start_kernel set the provisioner, the LocalProvisioner (the spec names no other); jupyter_client types it
        # as KernelProvisionerBase | None, which has no process or pgid
        state.process, state.group = kernel_manager.provisioner.process, kernel_manager.provisioner.pgid  # type: ignore[union-attr]
        if state.stop:  # asked to stop while the kernel was starting
            return

        def on_cell_execute(cell: Any, cell_index: int) -> None:
            state.cell = cell_index + 1

        def on_cell_executed(cell: Any, cell_index: int, execute_reply: dict) -> None:
            state.cells_run += 1

        client = NotebookClient(
            state.notebook,
            km=kernel_manager,
            timeout=state.cell_timeout,
            on_cell_execute=on_cell_execute,
            on_cell_executed=on_cell_executed,
            resources={"metadata": {"path": str(state.cwd)}},
            iopub_timeout=IOPUB_TIMEOUT_S,
        )
        await client.async_execute()
    except CellExecutionError as exc:
        text = str(exc).strip()
        state.error = text.splitlines()[-1] if text else repr(exc)
    except Exception as exc:  # noqa: BLE001 (a dead kernel or a cell timeout is reported, and the next notebook runs)
        death = kernel_death(state.process) if state.process is not None else None
        state.error = f"kernel died ({death}) {state.where()}" if death else f"{type(exc).__name__}: {exc}"
    finally:
        state.shutting_down = True
        if client is not None and client.kc is not None:
            client.kc.stop_channels()
        if kernel_manager.has_kernel:
            await kernel_manager.shutdown_kernel(now=True)


def _worker(state: _Execution) -> None:
    """The worker thread: run `_execute` on this thread's own event loop."""
    try:
        asyncio.run(_execute(state))
    except asyncio.CancelledError:
        pass  # the main thread stopped the notebook and has recorded why
    except Exception as exc:  # noqa: BLE001 (whatever went wrong is the notebook's reported error)
        state.error = state.error or f"{type(exc).__name__}: {exc}"
    finally:
        state.done.set()


def _watch(state: _Execution, *, started: float, limit_s: float | None) -> str | None:
    """Poll while the worker runs; return why the notebook must be stopped, or None once it has finished."""
    while not state.done.wait(POLL_S):
        death = kernel_death(state.process) if state.process is not None else None
        if state.shutting_down:  # read after the death check: the worker sets it before it stops the kernel
            continue
        if death:
            return f"kernel died ({death}) {state.where()}"
        if limit_s is not None and time.perf_counter() - started > limit_s:
            return f"over its {limit_s:g} s limit {state.where()}"
    return None


def _stop(state: _Execution) -> bool:
    """Stop a running notebook: kill its kernel, cancel nbclient, wait for the worker; False if it had to be left."""
    state.stop = True
    _kill_kernel(state.process, state.group)
    loop, task = state.loop, state.task
    if loop is not None and task is not None:
        try:
            loop.call_soon_threadsafe(task.cancel)
        except RuntimeError:
            pass  # its loop has already closed: the worker is finishing
    finished = state.done.wait(STOP_GRACE_S)
    _kill_kernel(state.process, state.group)  # in case it was started while we were stopping
    return finished


def _runnable(cell: Any) -> bool:
    """True for a code cell nbclient executes (not blank, not tagged skip-execution)."""
    skipped = NotebookClient.skip_cells_with_tag.default_value in cell.get("metadata", {}).get("tags", [])
    return cell.cell_type == "code" and bool(cell.source.strip()) and not skipped


def execute_notebook(
    path: Path, out_dir: Path, *, limit_s: float | None = None, cell_timeout: int | None = None
) -> NotebookRun:
    """Execute one notebook in a fresh kernel (cwd = its folder), stopping it past `limit_s` seconds or when its
    kernel dies; write the executed copy and its HTML to `out_dir`. A Ctrl-C/SIGTERM raised as CourseInterrupted
    stops the notebook, writes its copies, and is re-raised carrying the NotebookRun."""
    started = time.perf_counter()
    notebook = nbformat.read(path, as_version=4)
    state = _Execution(notebook, path.parent, cell_timeout)
    worker = threading.Thread(target=_worker, args=(state,), name=f"notebook {path.stem}", daemon=True)
    interrupted, reason, launched = None, None, False
    meter = LoadMeter()  # the kernel and its workers are this process's descendants: "other" is the rest
    meter.start()
    try:
        if any(_runnable(c) for c in notebook.cells):  # a lesson with no code fails below, no kernel needed
            launched = True
            worker.start()
            reason = _watch(state, started=started, limit_s=limit_s)
    except CourseInterrupted as exc:
        interrupted, reason = exc, f"interrupted by {exc.signal_name} {state.where()}"
    finally:
        if launched and not state.done.is_set() and not _stop(state):
            reason = f"{reason or 'stopped'} (its nbclient thread did not stop and was left behind)"
    seconds = time.perf_counter() - started
    run = _write_copies(path, out_dir, state, seconds, reason or state.error, interrupted is not None)
    run.load = meter.stop().as_dict()
    if interrupted is not None:
        interrupted.run = run
        raise interrupted
    return run


def _write_copies(
    path: Path, out_dir: Path, state: _Execution, seconds: float, error: str | None, interrupted: bool
) -> NotebookRun:
    """Write the executed notebook and its HTML into `out_dir`; return the NotebookRun describing them."""
    code = [c for c in state.notebook.cells if _runnable(c)]
    executed_path, html_path = write_copies(state.notebook, path.name, out_dir)
    return NotebookRun(
        path.stem, seconds, len(code), state.cells_run, str(executed_path), str(html_path), error, interrupted
    )


def _install_stop_handlers() -> dict[int, Any]:
    """Make the first Ctrl-C or SIGTERM raise CourseInterrupted in the main thread; return the handlers it replaced."""
    received: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        if received:  # the runner is already stopping: a second signal must not cut its cleanup short
            return
        received.append(signum)
        raise CourseInterrupted(signum)

    return {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}


def run_course(
    profile: str = "auto",
    out_dir: Path = REPORTS_DIR,
    notebooks: list[Path] | None = None,
    *,
    limit_s: float | None = None,
) -> int:
    """Prepare the data, execute every notebook in `profile` (each within `limit_s` seconds, by default the
    profile's `notebook_limit_s`), rewrite the report after each; return a process exit code."""
    chosen = resolve_profile(profile)
    limit_s = limit_s or chosen.notebook_limit_s
    os.environ[PROFILE_ENV_VAR] = chosen.name  # every notebook's kernel inherits it
    out_dir.mkdir(parents=True, exist_ok=True)
    results_file = out_dir / "results.jsonl"
    results_file.unlink(missing_ok=True)
    os.environ[RESULTS_ENV_VAR] = str(results_file)
    environment = environment_report()
    print(f"profile: {chosen.name} (each notebook within {limit_s:g} s)")
    print(f"environment: {format_environment_report(environment)}")
    notebooks = notebooks or course_notebooks()
    runs: list[NotebookRun] = []
    sources: list[str] = []

    def report(progress: str) -> tuple[Path, Path]:
        pending = [p.stem for p in notebooks[len(runs) :]]
        return write_report(
            runs,
            environment,
            chosen.name,
            sources,
            out_dir,
            read_results(results_file),
            pending=pending,
            progress=progress,
        )

    previous = _install_stop_handlers()
    code = 0
    try:
        try:
            for prepare in (prepare_bsds300, prepare_cifar10):
                sources.append(prepare().describe())
                print(f"data: {sources[-1]}")
            report(f"running, 0 of {len(notebooks)} notebooks done")
            for path in tqdm(notebooks, desc="notebooks", unit="nb"):
                runs.append(execute_notebook(path, out_dir / "notebooks", limit_s=limit_s))
                tqdm.write(f"{runs[-1].name}: {runs[-1].status} in {runs[-1].seconds:.1f} s")
                report(f"running, {len(runs)} of {len(notebooks)} notebooks done")
            progress = "finished"
        except CourseInterrupted as exc:
            if exc.run is not None:
                runs.append(exc.run)
            progress, code = f"{exc} after {len(runs)} of {len(notebooks)} notebooks", 128 + exc.signum
            print(f"\n{progress}: writing the report of what ran", file=sys.stderr)
        for signum in previous:  # whatever arrives now, the report of what ran gets written
            signal.signal(signum, signal.SIG_IGN)
        summary, index = report(progress)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print(f"\nexecuted notebooks: {out_dir / 'notebooks'}\nreport: {index}\nsummary: {summary}")
    failed = [r.name for r in runs if not r.ok and not r.interrupted]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
    return code or (1 if failed else 0)


def main(argv: list[str] | None = None) -> int:
    """Command line: python -m helpers.course.runner [--profile auto|smoke|cpu|full] [--limit S] [--out reports]."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="auto", help="auto (full on CUDA, else cpu), smoke, cpu or full")
    parser.add_argument("--out", type=Path, default=REPORTS_DIR, help="folder for the executed notebooks and report")
    parser.add_argument(
        "--limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="wall-time limit per notebook (default: the profile's notebook_limit_s)",
    )
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: all, in order)")
    args = parser.parse_args(argv)
    return run_course(args.profile, args.out, args.notebooks or None, limit_s=args.limit)


if __name__ == "__main__":
    raise SystemExit(main())
