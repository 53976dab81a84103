"""The course's ladders: memory accounting by scale, the bench command line, the JPEG decoder table."""

from __future__ import annotations

import json

import numpy as np
import torch
from PIL import Image

from helpers.course.decoders import jpeg_decode_benchmark
from helpers.course.ladders import main, sr_memory_by_scale


def _photos(tmp_path, count=3):
    rng = np.random.default_rng(0)
    for i in range(count):
        Image.fromarray(rng.integers(0, 256, (130, 150, 3), dtype=np.uint8)).save(tmp_path / f"p{i}.png")
    return sorted(tmp_path.glob("*.png"))


def test_memory_accounting_by_scale(tmp_path):
    rows = sr_memory_by_scale(_photos(tmp_path), scales=(2, 4))
    for row in rows:
        s = row["scale"]
        # float32 inputs at HR size against uint8 LR: 4 bytes x s^2 pixels (exact up to the mod-crop)
        assert abs(row["input_ratio"] - 4 * s * s) < 0.02 * 4 * s * s
        # float32 input + HR (8 bytes per HR pixel per channel) against RGBX uint8 HR + LR (4/3 per channel)
        assert abs(row["total_ratio"] - 6 / (1 + 1 / s**2)) < 0.02 * row["total_ratio"]


def test_bench_cli_writes_the_ladder_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    monkeypatch.setenv("COURSE_PROFILE", "smoke")
    out = tmp_path / "sr.json"
    assert main(["sr", "--json", str(out), "--hr-crop", "48", "--batch-size", "4"]) == 0
    rungs = json.loads(out.read_text())["rungs"]
    assert rungs[0]["name"].startswith("naive: pre-upscaled files from disk")
    assert any("lazy" in r["name"] for r in rungs)
    for rung in rungs:
        assert rung["samples_per_s"] > 0 and 0 < rung["pipeline_efficiency"]
    assert "| rung |" in capsys.readouterr().out


def test_jpeg_decode_benchmark_measures_cpu_decoders_and_explains_skips(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(3):
        path = tmp_path / f"{i}.jpg"
        Image.fromarray(rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    rows = jpeg_decode_benchmark(paths, torch.device("cpu"), repeats=1)
    assert rows[0]["images_per_s"] > 0 and rows[1]["images_per_s"] > 0
    skipped = [r for r in rows if r["images_per_s"] is None]
    assert skipped and all(r["note"].startswith("skipped:") for r in skipped)
