"""Results a notebook hands to the course report: tables and headlines recorded during `make course` (a no-op
elsewhere), kept apart from the runner so that notebooks need none of the runner's packages."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

RESULTS_ENV_VAR = "COURSE_RESULTS_FILE"


def record_result(title: str, text: str) -> bool:
    """Hand a notebook's table or headline to the course report (a no-op outside `make course`); True if recorded.

    The runner sets COURSE_RESULTS_FILE; each call appends one block, shown in the summary in order.
    """
    target = os.environ.get(RESULTS_ENV_VAR)
    if not target:
        return False
    with open(target, "a", encoding="utf-8") as f:
        f.write(json.dumps({"title": title, "text": text}) + "\n")
    return True


def read_results(path: Path) -> list[dict[str, str]]:
    """The blocks recorded during a run, in order."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def git_commit(root: Path | None = None) -> dict[str, Any]:
    """The commit this code runs from and whether the tree had uncommitted changes (None for both outside git)."""
    where = str(root or Path(__file__).resolve().parent)
    try:
        commit = subprocess.run(["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        status = subprocess.run(
            ["git", "-C", where, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None}
    if commit.returncode != 0:
        return {"commit": None, "dirty": None}
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}


def load_summary(loads: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Load-meter readings (LoadReading.as_dict()) summed up: the most other processes used, and whether any was busy."""
    known = [load for load in loads if load]
    if not known:
        return None
    averages = [load["load_average"] for load in known if load.get("load_average") is not None]
    return {
        "other_cores_max": max(load["other_cores"] for load in known),
        "cores": known[0]["cores"],
        "busy": any(load["busy"] for load in known),
        "load_average_max": max(averages) if averages else None,
    }


def provenance(*, profile: str, device: Any, rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What a saved result must say about where it came from: commit (and dirty flag), profile, device, load meter."""
    load = load_summary([row.get("load") for row in rows or []])
    return {**git_commit(), "profile": profile, "device": str(device), "load": load}
