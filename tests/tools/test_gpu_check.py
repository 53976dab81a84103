"""The GPU check's script: its command line refuses clearly; its plan gives every notebook a step of its own; run with
a stand-in Python whose every command finishes at once, a rehearsal reports each CUDA step as skipped (never as
passed), a failing notebook is recorded with its traceback while the others still run, a step the budget cannot fit
is not run and says so, a stop from outside still leaves a summary, and without a host C compiler the torch.compile
rows are left out with the reason. `make test-gpu` installs with the GPU runner's pins. (The whole rehearsal on the
real course takes minutes: `make gpu-rehearsal`, which CI runs.)"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import versions

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "gpu_check.sh"
NOTEBOOKS = sorted(p.name for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# A stand-in for the machine's Python: the summary tool and sysconfig run for real; `import torch` answers whether
# CUDA is there (FAKE_CUDA); every other command (pytest, the benchmarks, ...) prints its arguments and succeeds at
# once, or fails with a traceback when its arguments contain FAKE_FAIL, or sleeps when they contain FAKE_SLEEP.
FAKE_PYTHON = """#!/usr/bin/env bash
case "$*" in
    *gpu_summary.py* | *sysconfig*) exec "$REAL_PYTHON" "$@" ;;
    *"import torch"*) echo "${FAKE_CUDA:-0}"; exit 0 ;;
esac
echo "fake python: $*"
if [[ -n ${FAKE_FAIL:-} && "$*" == *"$FAKE_FAIL"* ]]; then
    printf 'Traceback (most recent call last):\\n  File "cell 7", line 1\\nRuntimeError: planted failure\\n'
    exit 1
fi
if [[ -n ${FAKE_SLEEP:-} && "$*" == *"$FAKE_SLEEP"* ]]; then sleep 60; fi
exit 0
"""


def _check(*arguments: str, tmp_path: Path, env: dict | None = None, **options) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path), **(env or {})}
    return subprocess.run(
        ["bash", str(SCRIPT), *arguments], env=env, capture_output=True, text=True, timeout=120, **options
    )


@pytest.fixture
def fake(tmp_path):
    """The environment that runs the script with the stand-in Python."""
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return {"PYTHON": str(python), "REAL_PYTHON": sys.executable, "GPU_CHECK_COMMIT": "abc123"}


def _steps(out: Path) -> dict[str, list[str]]:
    """OUT/steps.tsv as the script wrote it: name -> [status, exit code, seconds, limit, mode, note, needs]."""
    return {line.split("\t")[0]: line.split("\t")[1:] for line in (out / "steps.tsv").read_text().splitlines()}


def test_the_output_folder_is_required_and_unknown_options_are_refused(tmp_path):
    result = _check(tmp_path=tmp_path)
    assert result.returncode == 2 and "name the folder for the summary" in result.stderr
    assert "tools/gpu_check.sh OUT_DIR [--wheelhouse DIR] [--rehearsal]" in result.stdout  # the usage follows
    result = _check(str(tmp_path / "out"), "--rehersal", tmp_path=tmp_path)
    assert result.returncode == 2 and "unknown option --rehersal" in result.stderr
    result = _check(str(tmp_path / "out"), "--budget", "9m", tmp_path=tmp_path)
    assert result.returncode == 2 and "--budget takes whole seconds" in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU here the check would run for minutes")
def test_without_a_gpu_the_check_asks_for_a_rehearsal(tmp_path):
    result = _check(str(tmp_path / "out"), "--work", str(tmp_path / "work"), tmp_path=tmp_path)
    assert result.returncode == 2 and "torch sees no CUDA device" in result.stderr and "--rehearsal" in result.stderr
    assert not (tmp_path / "out" / "summary.json").exists()


def _plan(*arguments: str, tmp_path: Path) -> tuple[str, list[list[str]]]:
    result = _check("OUT", "--plan", *arguments, tmp_path=tmp_path, env={"GPU_CHECK_CORES": "16"})
    assert result.returncode == 0, result.stderr
    head, *lines = result.stdout.splitlines()
    return head, [line.split("\t") for line in lines]


def test_the_plan_gives_every_notebook_its_own_required_cuda_step_within_the_budget(tmp_path):
    head, steps = _plan(tmp_path=tmp_path)
    names = [s[0] for s in steps]
    assert names[:5] == ["compiler", "install", "packages", "data", "cuda-tests"]
    assert names[-4:] == ["bench-sr", "bench-cifar", "speedups", "train-cifar"]
    nbval = {s[4].removeprefix("nbval, smoke profile: "): s for s in steps if s[0].startswith("nbval-")}
    assert sorted(nbval) == NOTEBOOKS  # one process per notebook, every notebook in notebooks/
    assert all(s[0] == f"nbval-{name[:2]}" and s[1:3] == ["required", "cuda"] for name, s in nbval.items())
    assert all(s[2] == "cuda" for s in steps[4:]) and all(s[2] == "cpu" for s in steps[:4])
    assert head == "parallel: 4 at once in phase 2; budget: 560 s"
    limits = {s[0]: int(s[3]) for s in steps}
    late = sum(limits[name] for name in ("bench-sr", "bench-cifar", "speedups", "train-cifar"))
    # phase 2 (the tests and notebooks) is cut to what the budget leaves after the later steps' limits and the
    # summary's 15 s: after a minute of setup (install, packages, data), it keeps two minutes at least
    assert 60 + 120 + late + 15 <= 560 and max(limits[n] for n in names if n.startswith(("nbval", "cuda"))) <= 200
    head, steps = _plan("--rehearsal", tmp_path=tmp_path)
    assert head.endswith("budget: none") and "--profile smoke" in steps[-1][4]


def test_a_rehearsal_reports_every_cuda_step_as_skipped_never_as_passed(tmp_path, fake):
    out = tmp_path / "out"
    result = _check(str(out), "--rehearsal", "--work", str(tmp_path / "work"), tmp_path=tmp_path, env=fake)
    assert result.returncode == 0, result.stdout + result.stderr
    steps = _steps(out)  # the script's own record, before the summary reads it
    cuda = {name: fields[0] for name, fields in steps.items() if fields[-1] == "cuda"}
    assert cuda == {name: "skipped" for name in cuda} and len(cuda) == 5 + len(NOTEBOOKS)
    assert steps["packages"][0] == steps["data"][0] == "passed"
    assert all("ran on the CPU without error, nothing checked on a GPU" in steps[name][5] for name in cuda)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rehearsal"] and summary["final"] and summary["publish_as"] is None
    assert summary["verdict"] == f"rehearsal passed: every step ran, its {len(cuda)} CUDA steps skipped (no GPU here)"
    assert [n["status"] for n in summary["notebooks"]] == ["skipped"] * len(NOTEBOOKS)
    assert "fake python: -m pytest tests/cuda -m cuda" in (out / "logs" / "cuda-tests.log").read_text()
    if shutil.which("gcc") or shutil.which("clang"):  # with a host C compiler, torch.compile is tried
        assert steps["compiler"][0] == "passed" and "--skip-compile" not in (out / "logs" / "speedups.log").read_text()


def test_a_failing_notebook_is_recorded_with_its_traceback_and_the_others_still_run(tmp_path, fake):
    out = tmp_path / "out"
    failing = NOTEBOOKS[3]
    env = {**fake, "FAKE_FAIL": failing}
    result = _check(str(out), "--rehearsal", "--work", str(tmp_path / "work"), tmp_path=tmp_path, env=env)
    assert result.returncode == 1
    steps = _steps(out)
    assert steps[f"nbval-{failing[:2]}"][0] == "failed"
    assert [steps[f"nbval-{name[:2]}"][0] for name in NOTEBOOKS if name != failing] == ["skipped"] * (
        len(NOTEBOOKS) - 1
    )  # each notebook in its own process: the ones after it ran too
    assert steps["train-cifar"][0] == "skipped"  # and so did every later step
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"] == f"failed: nbval-{failing[:2]}"
    (failure,) = summary["failures"]
    assert failure["step"] == f"nbval-{failing[:2]}" and failure["traceback"].endswith("RuntimeError: planted failure")
    assert "Traceback (most recent call last)" in (out / "summary.md").read_text()


def test_on_a_gpu_every_step_fits_the_budget_and_one_it_cannot_fit_is_not_run(tmp_path, fake):
    out = tmp_path / "out"
    env = {**fake, "FAKE_CUDA": "1", "GPU_CHECK_CORES": "16"}
    result = _check(str(out), "--work", str(tmp_path / "work"), tmp_path=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    steps = _steps(out)
    assert {fields[0] for name, fields in steps.items() if name != "compiler"} <= {"passed", "skipped"}
    assert all(steps[f"nbval-{name[:2]}"][0] == "passed" for name in NOTEBOOKS)  # on a GPU, passed means passed
    assert int(steps["cuda-tests"][3]) <= 560 - 330  # phase 2 leaves the later steps their limits
    assert json.loads((out / "summary.json").read_text())["verdict"] == "passed"
    short = tmp_path / "short"
    result = _check(str(short), "--budget", "200", "--work", str(tmp_path / "work2"), tmp_path=tmp_path, env=env)
    steps = _steps(short)
    assert steps["data"][0] == "not-run" and "of the budget were left for it" in steps["data"][5]
    assert "nothing else can run" in result.stderr and "cuda-tests" not in steps
    assert result.returncode == 1 and "data" in json.loads((short / "summary.json").read_text())["verdict"]


def test_a_stop_from_outside_still_leaves_a_summary(tmp_path, fake):
    out = tmp_path / "out"
    env = {**fake, "FAKE_SLEEP": NOTEBOOKS[0]}
    process = subprocess.Popen(
        ["bash", str(SCRIPT), str(out), "--rehearsal", "--work", str(tmp_path / "work")],
        env={**os.environ, "TMPDIR": str(tmp_path), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (out / "logs" / f"nbval-{NOTEBOOKS[0][:2]}.log").exists():  # the notebook's step has started
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.2)
    stopped = time.monotonic()
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)
    assert time.monotonic() - stopped < 15  # not the 60 s the notebook would have slept
    assert process.returncode == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final"] and "interrupted" in summary["verdict"]
    step = _steps(out)[f"nbval-{NOTEBOOKS[0][:2]}"]
    assert step[0] == "failed" and "stopped from outside" in step[5]


def test_without_a_host_c_compiler_no_torch_compile_row_is_promised(tmp_path, fake):
    tools = tmp_path / "bin"  # a PATH with what the script uses, and no gcc, clang or cc
    tools.mkdir()
    for name in ("bash", "timeout", "nproc", "mktemp", "mkdir", "rm", "sed", "grep", "wc", "env", "dirname", "sleep"):
        (tools / name).symlink_to(shutil.which(name))
    out = tmp_path / "out"
    env = {**fake, "PATH": str(tools), "CC": ""}
    result = _check(str(out), "--rehearsal", "--work", str(tmp_path / "work"), tmp_path=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    steps = _steps(out)
    assert steps["compiler"][0] == "skipped" and "no host C compiler ($CC, gcc or clang)" in steps["compiler"][5]
    assert (
        "--skip-compile no host C compiler ($CC, gcc or clang): Triton needs one"
        in (out / "logs" / "speedups.log").read_text()
    )
    assert "- **torch.compile**: no host C compiler" in (out / "summary.md").read_text()


def test_make_test_gpu_installs_with_the_gpu_runners_pins_and_checks_them(tmp_path):
    newest = sorted((REPO / "constraints").glob("gpu-runner-*.txt"))[-1].relative_to(REPO)
    venv = tmp_path / "venv"
    result = subprocess.run(
        ["make", "-n", "-B", "test-gpu", f"VENV={venv}"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    lines = result.stdout.splitlines()
    install = next(i for i, line in enumerate(lines) if "pip install" in line)
    assert f"-c {newest} -e '.[course,jupyter,test]'" in lines[install]
    assert lines[install + 1] == f"{venv}/bin/python tools/versions.py --check-pins {newest}"
    assert any("COURSE_REQUIRE_CUDA=1" in line and "pytest tests notebooks" in line for line in lines[install:])


def test_the_pin_check_names_what_differs(tmp_path, capsys):
    from importlib import metadata

    constraints = tmp_path / "stack.txt"
    constraints.write_text(f"# python: 3.12\npytest=={metadata.version('pytest')}\nnot-installed-anywhere==1.0\n")
    assert versions.pins_here(constraints) == ["not-installed-anywhere missing (pinned 1.0)"]
    assert versions.main(["--check-pins", str(constraints)]) == 1
    assert "not-installed-anywhere missing (pinned 1.0)" in capsys.readouterr().err
    constraints.write_text(f"pytest=={metadata.version('pytest')}\n")
    assert versions.main(["--check-pins", str(constraints)]) == 0


def test_ci_rehearses_the_gpu_check_on_every_change():
    ci = (REPO / ".ci" / "run").read_text()
    assert "\nmake gpu-rehearsal" in ci and ci.index("\nmake test\n") < ci.index("\nmake gpu-rehearsal")
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "gpu-rehearsal"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert "tools/gpu_check.sh reports/gpu-rehearsal --rehearsal" in result.stdout.splitlines()[-1]
