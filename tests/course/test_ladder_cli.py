"""`python -m helpers.course.bench`: the ladder's rows written as JSON, and the notebooks built through the same path."""

from __future__ import annotations

import json

from helpers.course.ladder_cli import main

# the keys of each rung in the JSON the bench writes, in their order (what readers of reports/*.json rely on)
RUNG_KEYS = [
    "name",
    "role",
    "bounds",
    "model_note",
    "workers",
    "threads",
    "loader_samples_per_s",
    "loader_samples_per_s_range",
    "fed_samples_per_s",
    "fed_samples_per_s_range",
    "premade_samples_per_s",
    "premade_samples_per_s_range",
    "pipeline_efficiency",
    "efficiency_range",
    "data_wait_ms",
    "compute_ms",
    "premade_step_ms",
    "rounds",
    "steps_per_turn",
    "peak_device_mib",
    "load",
    "load_note",
    "doctor",
    "loader_vs_first",
    "loader_rounds",
    "fed_rounds",
]


def test_bench_cli_writes_the_ladder_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    monkeypatch.setenv("COURSE_PROFILE", "smoke")
    out = tmp_path / "sr.json"
    assert main(["sr", "--json", str(out), "--hr-crop", "48", "--batch-size", "4"]) == 0
    payload = json.loads(out.read_text())
    rungs = payload["rungs"]
    assert rungs[0]["name"].startswith("naive: pre-upscaled files from disk") and rungs[0]["role"] == "seed post"
    assert any("lazy" in r["name"] for r in rungs)
    for rung in rungs:
        assert rung["loader_samples_per_s"] > 0 and rung["pipeline_efficiency"] > 0 and rung["load"]["cores"] >= 1
        assert list(rung) == RUNG_KEYS  # the file's format, whatever type the rows have in memory
        assert len(rung["fed_samples_per_s_range"]) == 2
    assert payload["profile"] == "smoke" and payload["device"] == "cpu" and "dirty" in payload and "commit" in payload
    assert payload["load"]["cores"] >= 1
    assert "| rung |" in capsys.readouterr().out


def test_the_notebooks_build_their_ladders_through_the_benchs_path():
    # one construction path: a notebook that assembled its own rungs could drift from python -m helpers.course.bench
    import inspect
    from pathlib import Path

    import nbformat

    from helpers.course import ladder_cli

    notebooks = Path(__file__).resolve().parents[2] / "notebooks"
    for pattern, path in (("measure_sr_ladder(", "sr"), ("measure_cifar_ladder(", "cifar")):
        assert pattern in inspect.getsource(getattr(ladder_cli, f"_{path}_command"))
        users = [
            p.name
            for p in sorted(notebooks.glob("*.ipynb"))
            if pattern in "\n".join(c.source for c in nbformat.read(p, 4).cells if c.cell_type == "code")
        ]
        assert users, f"no notebook runs {pattern}"
    for p in sorted(notebooks.glob("*.ipynb")):
        code = "\n".join(c.source for c in nbformat.read(p, 4).cells if c.cell_type == "code")
        assert "run_ladder(" not in code, f"{p.name} runs a ladder of its own making: use measure_*_ladder"
