"""The training command line: both recipes train and resume in the smoke profile, on the stand-ins."""

from __future__ import annotations

import json

import pytest

from helpers.course.recipes import main


@pytest.mark.parametrize("task", ["sr", "cifar"])
def test_the_cli_trains_and_resumes_in_the_smoke_profile(tmp_path, monkeypatch, capsys, task):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    folder = tmp_path / "run"
    assert main([task, "--profile", "smoke", "--checkpoint-dir", str(folder)]) == 0
    history = json.loads((folder / "history.json").read_text())
    metric = "psnr_y" if task == "sr" else "top1"
    assert metric in history[-1]
    assert history[-1]["optimizer_steps"] == 4 and history[-1]["time_capped"] is False  # the smoke plan: 4 steps
    out = capsys.readouterr().out
    assert "smoke run" in out and "stand-in" in out
    assert main([task, "--profile", "smoke", "--checkpoint-dir", str(folder), "--resume"]) == 0  # already done
    assert len(json.loads((folder / "history.json").read_text())) == len(history)


def test_a_run_cut_by_its_cap_says_so_beside_its_score():
    from types import SimpleNamespace

    from helpers.course.recipes import run_summary

    recipe = SimpleNamespace(steps=100, expected_s=20.0, time_limit_s=60.0)
    whole = run_summary([{"optimizer_steps": 100, "trained_seconds": 21.0, "time_capped": False}], recipe)
    assert whole.startswith("100 of 100 planned optimizer steps in 21 s (calibrated: about 20 s)") and "CUT" not in whole
    cut = run_summary([{"optimizer_steps": 61, "trained_seconds": 60.0, "time_capped": True}], recipe)
    assert "61 of 100 planned" in cut and "CUT BY THE TIME CAP of 60 s" in cut
