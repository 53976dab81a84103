"""The GPU check's command line refuses clearly: no output folder, an unknown option, or no GPU without --dry-run.
(Its full dry run takes many minutes on two cores: it is run by hand, not here.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu_check.sh"


def _check(*arguments: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path)}
    return subprocess.run(["bash", str(SCRIPT), *arguments], env=env, capture_output=True, text=True, timeout=120)


def test_the_output_folder_is_required_and_unknown_options_are_refused(tmp_path):
    result = _check(tmp_path=tmp_path)
    assert result.returncode == 2 and "name the folder for the summary" in result.stderr
    assert "tools/gpu_check.sh OUT_DIR [--wheelhouse DIR] [--dry-run]" in result.stdout  # the usage follows
    result = _check(str(tmp_path / "out"), "--dryrun", tmp_path=tmp_path)
    assert result.returncode == 2 and "unknown option --dryrun" in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU here the check would run for minutes")
def test_without_a_gpu_the_check_asks_for_a_dry_run(tmp_path):
    result = _check(str(tmp_path / "out"), "--work", str(tmp_path / "work"), tmp_path=tmp_path)
    assert result.returncode == 2 and "torch sees no CUDA device" in result.stderr and "--dry-run" in result.stderr
    assert not (tmp_path / "out" / "summary.json").exists()
