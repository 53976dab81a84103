"""The DDP error path on two gloo ranks: a rank whose loss turns NaN mid-run raises, leaves the process group with
no barrier (a barrier there pairs with its peer's all-reduce and both wait for ever), and its peer's next collective
fails, so both processes exit non-zero well within a minute."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.course import recipe_run

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 60  # both ranks gone this long after both joined the group, or the test fails (and kills them)
STARTUP_S = 300  # for both to start Python, import torch and join


def _wait_until(done: Callable[[], bool], seconds: float) -> None:
    """Poll `done()` every 0.1 s for up to `seconds`."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_rank_that_raises_mid_run_ends_both_ranks_non_zero_within_a_minute(tmp_path):
    port = _free_port()
    ranks = []
    for rank in range(2):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "CUDA_VISIBLE_DEVICES": "",  # gloo on the CPU even on a GPU machine
            "PYTHONPATH": str(ROOT),
            "OMP_NUM_THREADS": "1",
        }
        command = [sys.executable, "-m", "tests.ddp_error_worker"]
        with open(tmp_path / f"rank{rank}.log", "w") as log:  # the child keeps its own copy of the descriptor
            ranks.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
    logs = [tmp_path / f"rank{rank}.log" for rank in range(2)]
    try:
        # Starting Python and torch is not what is tested (on a loaded 2-core machine it took most of a minute):
        # the clock starts once both ranks have joined the group; rank 1 fails four steps later.
        joined = lambda: all("joined the process group" in log.read_text() for log in logs)  # noqa: E731
        gone = lambda: [process.poll() is not None for process in ranks]  # noqa: E731
        _wait_until(lambda: joined() or any(gone()), STARTUP_S)  # a rank that died starting fails the asserts
        started = time.monotonic()
        _wait_until(lambda: all(gone()), LIMIT_S)
        seconds = time.monotonic() - started
        codes = [process.poll() for process in ranks]
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()
                process.wait()
    logs = [log.read_text() for log in logs]
    hung = [rank for rank, code in enumerate(codes) if code is None]
    assert not hung, f"rank(s) {hung} still running {LIMIT_S} s after both joined (hung); logs:\n" + "\n".join(logs)
    assert all(code != 0 for code in codes), f"exit codes {codes}; logs:\n" + "\n".join(logs)
    assert "NonFiniteLossError" in logs[1] and "failed=True" in logs[1], logs[1]
    assert "failed=True" in logs[0], logs[0]  # the peer's collective failed: it left without a barrier too
    print(f"both ranks exited non-zero ({codes}) after {seconds:.1f} s")


@pytest.mark.parametrize("error", [RuntimeError("CUDA out of memory"), KeyboardInterrupt()])
def test_the_training_command_leaves_the_group_without_a_barrier_when_the_run_fails(monkeypatch, error):
    """`python -m helpers.course.train` tells cleanup_distributed that the run failed (an error or Ctrl-C), and that it
    did not when it returned."""
    left: list[bool] = []
    recipe = types.SimpleNamespace(description="d", precision=types.SimpleNamespace(reason="r"), plan="p", data="x")
    monkeypatch.setattr(recipe_run, "prepare_cifar10", lambda **kwargs: None)
    monkeypatch.setattr(recipe_run, "cifar_recipe", lambda *args, **kwargs: recipe)
    monkeypatch.setattr(recipe_run, "cleanup_distributed", lambda *, failed=False: left.append(failed))

    def failing_run(*args, **kwargs):
        raise error

    monkeypatch.setattr(recipe_run, "run_recipe", failing_run)
    if isinstance(error, KeyboardInterrupt):
        assert recipe_run.main(["cifar", "--profile", "smoke"]) == 130
    else:
        with pytest.raises(RuntimeError, match="out of memory"):
            recipe_run.main(["cifar", "--profile", "smoke"])
    assert left == [True]
    monkeypatch.setattr(recipe_run, "run_recipe", lambda *args, **kwargs: [{}])
    monkeypatch.setattr(recipe_run, "run_summary", lambda history, recipe: "")
    monkeypatch.setattr(recipe_run, "result_sentence", lambda record, task: "")
    assert recipe_run.main(["cifar", "--profile", "smoke"]) == 0
    assert left == [True, False]
