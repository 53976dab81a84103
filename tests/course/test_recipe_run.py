"""The training command line in the smoke profile, on the stand-ins: it trains the profile's steps, evaluates each
epoch, says what it ran on, and resuming a finished run trains nothing more. (A run interrupted mid-way and resumed
equals an uninterrupted one: tests/test_resume_cli.py.)"""

from __future__ import annotations

import json
import math

import pytest
import torch

from helpers.checkpoint import load_checkpoint
from helpers.course.profiles import resolve_profile
from helpers.course.recipe_run import main, result_sentence, run_summary


@pytest.mark.parametrize("task", ["sr", "cifar"])
def test_the_cli_trains_the_profiles_steps_and_a_finished_run_resumes_to_nothing(tmp_path, monkeypatch, capsys, task):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    folder = tmp_path / "run"
    assert main([task, "--profile", "smoke", "--checkpoint-dir", str(folder)]) == 0
    history = json.loads((folder / "history.json").read_text())
    assert history[-1]["optimizer_steps"] == 4 and history[-1]["time_capped"] is False  # the smoke plan: 4 steps
    assert [r["epoch"] for r in history] == list(range(1, len(history) + 1))
    metric, low, high = ("psnr_y", 5.0, 60.0) if task == "sr" else ("top1", 0.0, 1.0)
    assert all(math.isfinite(float(r["train_loss"])) for r in history)
    assert low <= history[-1][metric] <= high  # evaluated by the protocol, not a placeholder
    out = capsys.readouterr().out
    assert "smoke run" in out and "stand-in" in out
    trained = load_checkpoint(folder / "last.pt")
    assert trained["step"]["optimizer_steps"] == getattr(resolve_profile("smoke"), task).steps  # all trained

    assert main([task, "--profile", "smoke", "--checkpoint-dir", str(folder), "--resume"]) == 0  # already done
    assert json.loads((folder / "history.json").read_text()) == history
    resumed = load_checkpoint(folder / "last.pt")
    assert all(torch.equal(trained["model"][k], v) for k, v in resumed["model"].items())  # no step taken


def test_a_run_cut_by_its_cap_says_so_beside_its_score():
    from types import SimpleNamespace

    recipe = SimpleNamespace(steps=100, expected_s=20.0, time_limit_s=60.0)
    whole = run_summary([{"optimizer_steps": 100, "trained_seconds": 21.0, "time_capped": False}], recipe)
    assert (
        whole.startswith("100 of 100 planned optimizer steps in 21 s (calibrated: about 20 s)") and "CUT" not in whole
    )
    cut = run_summary([{"optimizer_steps": 61, "trained_seconds": 60.0, "time_capped": True}], recipe)
    assert "61 of 100 planned" in cut and "CUT BY THE TIME CAP of 60 s" in cut
    smoke = SimpleNamespace(steps=4, expected_s=0.3, time_limit_s=60.0)  # reader 3: "in 0 s (calibrated: about 0 s)"
    quick = run_summary([{"optimizer_steps": 4, "trained_seconds": 0.4, "time_capped": False}], smoke)
    assert quick.startswith("4 of 4 planned optimizer steps in 0.4 s (calibrated: about 0.3 s)")


def test_the_cli_says_its_score_in_a_sentence_against_its_baseline():
    sr = result_sentence({"psnr_y": 30.5, "bicubic_psnr_y": 29.0, "train_loss": 0.05}, task="sr")
    assert sr == "PSNR-Y 30.50 dB on the test images, +1.50 dB against MATLAB's bicubic; final training loss 0.050"
    low = result_sentence({"top1": 0.043, "train_loss": 2.3}, task="cifar")
    assert "top-1 4.3%" in low and "below the 10% of chance" in low and "{" not in low
    assert "above the 10% of chance" in result_sentence({"top1": 0.6, "train_loss": 1.0}, task="cifar")
