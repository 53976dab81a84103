"""The course runner executes a notebook in a fresh kernel and writes the executed copy, HTML and a summary; it
survives a kernel that dies (killed, or a zombie nbclient never reports), a notebook over its time limit, and
Ctrl-C/SIGTERM, and rewrites its report after every notebook."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from helpers.course import runner
from helpers.course.profiles import PROFILE_ENV_VAR
from helpers.course.report import WIDGET_VIEW, write_report
from helpers.course.results import RESULTS_ENV_VAR, read_results, record_result
from helpers.course.runner import execute_notebook, kernel_death, run_course

HAS_PROC = Path("/proc/self/stat").exists()


def _notebook(path, sources):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(notebook, path)
    return path


def test_runner_executes_and_reports(tmp_path, monkeypatch):
    results_file = tmp_path / "results.jsonl"
    monkeypatch.setenv(RESULTS_ENV_VAR, str(results_file))  # the kernel inherits it, as under `make course`
    recording = "from helpers.course.results import record_result\nrecord_result('ladder', '| rung | 42 |')"
    good = execute_notebook(
        _notebook(tmp_path / "00_good.ipynb", ["x = 6 * 7", "assert x == 42\nprint(x)", recording]), tmp_path / "out"
    )
    assert good.ok and good.executed_cells == good.code_cells == 3
    executed = nbformat.read(good.executed_path, as_version=4)
    assert executed.cells[1].outputs[0].text.strip() == "42"
    bad = execute_notebook(
        _notebook(tmp_path / "01_bad.ipynb", ["assert 1 == 2, 'broken lesson'", "y = 1"]), tmp_path / "out"
    )
    assert not bad.ok and "broken lesson" in bad.error
    environment = {
        "torch": "t",
        "torchvision": "v",
        "kornia": "k",
        "device": "cpu",
        "device_name": "x",
        "cpu_cores": 2,
        "python": "3",
    }
    results = read_results(results_file)
    assert results == [{"title": "ladder", "text": "| rung | 42 |"}]
    summary, index = write_report([good, bad], environment, "smoke", ["BSDS300 stand-in"], tmp_path / "out", results)
    text = summary.read_text()
    assert "00_good" in text and "FAILED" in text and "smoke" in text and "BSDS300 stand-in" in text
    assert "## ladder" in text and "| rung | 42 |" in text
    assert "00_good.html" in index.read_text() and "<h2>ladder</h2>" in index.read_text()
    saved = json.loads((tmp_path / "out" / "runs.json").read_text())
    assert len(saved["runs"]) == 2 and saved["provenance"]["profile"] == "smoke"
    assert saved["provenance"]["device"] == "cpu" and {"commit", "dirty", "load"} <= set(saved["provenance"])
    assert saved["runs"][0]["load"]["cores"] >= 1 and "other processes' CPU" in text
    assert f"{good.load['other_cores']:.1f} of {good.load['cores']} cores" in text and "- provenance: " in text
    assert not _kernel_children(), "the runner must stop each notebook's kernel before the next one starts"


def _kernel_children() -> list[int]:
    """PIDs of ipykernel processes whose parent is this process."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and b"ipykernel" in cmdline:
            children.append(int(stat.parent.name))
    return children


def test_a_notebook_that_ran_no_code_is_a_failure(tmp_path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# a lesson that forgot its code")]
    nbformat.write(notebook, tmp_path / "02_empty.ipynb")
    run = execute_notebook(tmp_path / "02_empty.ipynb", tmp_path / "out")
    assert run.code_cells == 0 and not run.ok


def test_record_result_is_a_no_op_outside_a_course_run(monkeypatch):
    monkeypatch.delenv(RESULTS_ENV_VAR, raising=False)
    assert record_result("title", "text") is False


def _wait_for(path: Path, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared: the notebook did not start"
        time.sleep(0.1)


@pytest.fixture
def no_data(monkeypatch):
    """run_course without fetching or building the course's data sets (the test notebooks need none)."""
    for name in ("prepare_bsds300", "prepare_cifar10"):
        monkeypatch.setattr(runner, name, lambda: SimpleNamespace(describe=lambda: "no data (test)"))
    monkeypatch.setenv(PROFILE_ENV_VAR, "smoke")  # run_course sets both; monkeypatch puts them back
    monkeypatch.setenv(RESULTS_ENV_VAR, "")


def test_kernel_death_names_the_signal_or_exit_code():
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert kernel_death(killed) is None
    killed.kill()
    killed.wait()
    assert kernel_death(killed) == "signal 9 (SIGKILL)"
    exited = subprocess.Popen([sys.executable, "-c", "import os; os._exit(3)"])
    exited.wait()
    assert kernel_death(exited) == "exit code 3"


@pytest.mark.skipif(not HAS_PROC, reason="the zombie kernel is made and seen through Linux's /proc")
def test_dead_kernels_are_reported_and_the_next_notebook_runs(tmp_path, no_data):
    out = tmp_path / "out"
    killed = _notebook(tmp_path / "00_killed.ipynb", ["import os, signal", "os.kill(os.getpid(), signal.SIGKILL)", "1"])
    # The kernel's main thread ends while another thread keeps the process (and ipykernel's heartbeat) alive: the
    # process is a zombie that never exits and that nbclient's liveness check never reports.
    zombie_cell = "threading.Thread(target=time.sleep, args=(600,)).start()\nctypes.CDLL(None).pthread_exit(None)"
    zombie = _notebook(tmp_path / "01_zombie.ipynb", ["import ctypes, threading, time", zombie_cell, "2"])
    reads_summary = f"summary = open({str(out / 'summary.md')!r}).read()\nprint(summary)"
    checks_summary = "assert '01_zombie' in summary and 'kernel died' in summary"
    good = _notebook(tmp_path / "02_good.ipynb", [reads_summary, checks_summary])
    started = time.monotonic()
    code = run_course("smoke", out, [killed, zombie, good], limit_s=120)
    elapsed = time.monotonic() - started
    runs = json.loads((out / "runs.json").read_text())["runs"]
    assert code == 1
    assert [r["name"] for r in runs] == ["00_killed", "01_zombie", "02_good"]
    assert runs[0]["error"] == "kernel died (signal 9 (SIGKILL)) at cell 2 of 3" and runs[0]["executed_cells"] == 1
    assert runs[1]["error"].startswith("kernel died (a zombie") and runs[1]["error"].endswith("at cell 2 of 3")
    assert runs[1]["executed_cells"] == 1
    assert runs[2]["error"] is None and runs[2]["executed_cells"] == 2, "the good notebook read the summary so far"
    assert elapsed < 100, f"{elapsed:.0f} s: a dead kernel must be noticed in seconds, not at the 120 s limit"
    summary = (out / "summary.md").read_text()
    assert "- run: finished" in summary and "FAILED: kernel died (signal 9 (SIGKILL)) at cell 2 of 3" in summary
    assert not _kernel_children(), "the zombie kernel must be killed and reaped"


def test_a_notebook_over_its_limit_is_stopped_with_everything_its_kernel_started(tmp_path):
    child_pid = tmp_path / "child.pid"
    starts_a_worker = (  # like a DataLoader worker: a process the kernel starts, in the kernel's process group
        f"import subprocess, sys, time\nchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"open({str(child_pid)!r}, 'w').write(str(child.pid))\ntime.sleep(120)"
    )
    slow = _notebook(tmp_path / "03_slow.ipynb", ["x = 1", starts_a_worker, "y = 2"])
    run = execute_notebook(slow, tmp_path / "out", limit_s=10)
    assert run.seconds < 60, f"{run.seconds:.0f} s: the limit must stop the 120-s cell"
    assert not run.ok and run.error.startswith("over its 10 s limit ")
    if child_pid.exists():  # the kernel started within the 10 s (it did not on a very busy machine)
        assert run.error == "over its 10 s limit at cell 2 of 3"
        assert run.executed_cells == 1, "cell 1 ran to its end; cell 2 was stopped and cell 3 never started"
        time.sleep(0.5)
        assert runner._process_state(int(child_pid.read_text())) in {None, "Z"}, "the kernel's child must be killed"
    assert not _kernel_children(), [(p, runner._process_state(p)) for p in _kernel_children()]


def _sleeping_notebooks(folder: Path, marker: Path) -> list[Path]:
    """A notebook whose second cell writes its kernel's pid to `marker` and sleeps, then one that never runs."""
    cell = f"import os, time\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)"
    return [_notebook(folder / "00_sleeping.ipynb", ["x = 1", cell]), _notebook(folder / "01_next.ipynb", ["y = 2"])]


def test_sigterm_stops_the_runner_kills_its_kernel_and_writes_the_summary(tmp_path):
    marker, out = tmp_path / "kernel.pid", tmp_path / "out"
    notebooks = _sleeping_notebooks(tmp_path, marker)
    driver = textwrap.dedent("""
        import sys, types
        from helpers.course import runner
        runner.prepare_bsds300 = runner.prepare_cifar10 = lambda: types.SimpleNamespace(describe=lambda: "no data")
        raise SystemExit(runner.main(sys.argv[1:]))
    """)
    command = [sys.executable, "-c", driver, "--profile", "smoke", "--out", str(out), *map(str, notebooks)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(marker)
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        output, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, output
    assert time.monotonic() - sent < 30, "SIGTERM must stop the runner in seconds, not when the cell ends"
    summary = (out / "summary.md").read_text()
    assert "- run: interrupted by SIGTERM after 1 of 2 notebooks" in summary
    assert "| interrupted by SIGTERM at cell 2 of 2 |" in summary and "| 01_next |  |  | not run |" in summary
    assert runner._process_state(int(marker.read_text())) is None, "the kernel must be gone with the runner"


def test_ctrl_c_stops_run_course_and_puts_the_signal_handlers_back(tmp_path, no_data):
    marker, out = tmp_path / "kernel.pid", tmp_path / "out"
    notebooks = _sleeping_notebooks(tmp_path, marker)
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)

    def press_ctrl_c():
        _wait_for(marker)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    assert run_course("smoke", out, notebooks, limit_s=120) == 128 + signal.SIGINT
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    runs = json.loads((out / "runs.json").read_text())["runs"]
    assert [(r["name"], r["error"], r["interrupted"], r["executed_cells"]) for r in runs] == [
        ("00_sleeping", "interrupted by SIGINT at cell 2 of 2", True, 1)
    ]
    assert nbformat.read(out / "notebooks" / "00_sleeping.ipynb", as_version=4).cells[0].execution_count == 1
    assert not _kernel_children(), [(p, runner._process_state(p)) for p in _kernel_children()]


def test_a_bar_whose_last_updates_reach_the_runner_late_is_saved_at_its_final_state(tmp_path, monkeypatch):
    # a busy runner reads a cell's widget messages after the cell's reply: here each takes 0.2 s, so the bar's last
    # updates arrive seconds after it (nbclient's default 4 s wait dropped them, and the bar was saved at 0%)
    from nbclient import NotebookClient

    handle = NotebookClient.handle_comm_msg

    def slow(self, outs, msg, cell_index):
        if msg["msg_type"] == "comm_msg":
            time.sleep(0.2)
        return handle(self, outs, msg, cell_index)

    monkeypatch.setattr(NotebookClient, "handle_comm_msg", slow)
    bar = "from tqdm.auto import tqdm\nfor i in tqdm(range(8), desc='train', mininterval=0):\n    pass"
    run = execute_notebook(_notebook(tmp_path / "00_bar.ipynb", [bar, "x = 1"]), tmp_path / "out")
    assert run.ok
    saved = nbformat.read(run.executed_path, as_version=4).cells[0].outputs
    texts = [o["data"]["text/plain"] for o in saved if WIDGET_VIEW in o.get("data", {})]
    assert len(texts) == 1 and texts[0].startswith("train: 100%|██████████| 8/8"), texts
