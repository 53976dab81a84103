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
    out = capsys.readouterr().out
    assert "smoke run" in out and "stand-in" in out
    assert main([task, "--profile", "smoke", "--checkpoint-dir", str(folder), "--resume"]) == 0  # already done
    assert len(json.loads((folder / "history.json").read_text())) == len(history)
