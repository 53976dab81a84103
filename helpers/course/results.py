"""Results a notebook hands to the course report: tables and headlines recorded during `make course` (a no-op
elsewhere), kept apart from the runner so that notebooks need none of the runner's packages."""

from __future__ import annotations

import json
import os
from pathlib import Path

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
