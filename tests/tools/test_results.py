"""No GPU number without a file: every summary in results/ is a real GPU run's, named by GPU and date with its page
beside it, and every results file the README and docs name is there."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "results"


def problems(folder: Path) -> list[str]:
    """What is wrong with the summaries in a results folder."""
    found = []
    for path in sorted(folder.glob("*.json")):
        summary = json.loads(path.read_text())
        if summary.get("dry_run") is not False or not summary.get("machine", {}).get("gpu"):
            found.append(f"{path.name}: not from a GPU run")
        if path.stem != summary.get("publish_as") or not re.fullmatch(r"[a-z0-9-]+-\d{4}-\d{2}-\d{2}", path.stem):
            found.append(f"{path.name}: not named <gpu>-<date> as its summary says ({summary.get('publish_as')})")
        if not path.with_suffix(".md").is_file():
            found.append(f"{path.name}: its page {path.stem}.md is missing")
    return found


def test_the_results_folder_explains_itself_and_holds_only_gpu_runs():
    text = (RESULTS / "README.md").read_text()
    assert "<gpu>-<date>.json" in text and "No GPU number appears anywhere else" in text
    assert problems(RESULTS) == []


def test_a_dry_run_or_a_misnamed_summary_is_refused(tmp_path):
    good = {"dry_run": False, "machine": {"gpu": "NVIDIA H200"}, "publish_as": "nvidia-h200-2026-12-01"}
    (tmp_path / "nvidia-h200-2026-12-01.json").write_text(json.dumps(good))
    (tmp_path / "nvidia-h200-2026-12-01.md").write_text("# GPU check\n")
    assert problems(tmp_path) == []
    (tmp_path / "mine.json").write_text(json.dumps({**good, "dry_run": True, "machine": {"gpu": None}}))
    assert problems(tmp_path) == [
        "mine.json: not from a GPU run",
        "mine.json: not named <gpu>-<date> as its summary says (nvidia-h200-2026-12-01)",
        "mine.json: its page mine.md is missing",
    ]


def test_every_results_file_the_readme_names_exists():
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), RESULTS / "cpu-run.md"]:
        text = page.read_text()
        named = set(re.findall(r"results/([\w.-]+\.(?:json|md))", text))
        missing = sorted(name for name in named if not (RESULTS / name).is_file())
        assert not missing, f"{page.name} names results files that do not exist: {missing}"
        if "From `tools/gpu_check.sh` on" in text:  # the caption of a GPU table made by gpu_summary.py readme-table
            assert named, f"{page.name} shows a GPU table without naming its results file"
