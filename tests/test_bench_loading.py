"""The measuring instruments: pipeline efficiency and the doctor, memory accounting, the sweep, the bench CLI."""

from __future__ import annotations

import json
import time

import numpy as np
import torch
from PIL import Image
from torch import nn

from helpers.bench import (
    PipelineResult,
    diagnose_pipeline,
    main,
    measure_pipeline,
    peak_rss_bytes,
    reset_peak_rss,
    sr_memory_by_scale,
)
from helpers.loading import loader_settings_grid, make_loader, sweep_loader_settings


class SlowLoader:
    """Batches that take `delay` seconds each to produce: an input-bound pipeline by construction."""

    def __init__(self, delay: float, batches: int = 4) -> None:
        self.delay, self.batches = delay, batches

    def __iter__(self):
        for _ in range(self.batches):
            time.sleep(self.delay)
            yield torch.zeros(4, 3), torch.zeros(4, 1)


def _step():
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(batch):
        x, y = batch
        optimizer.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()

    return step


def test_a_sleeping_loader_is_diagnosed_input_bound():
    result = measure_pipeline(SlowLoader(0.02), _step(), torch.device("cpu"), steps_per_block=3, blocks=2)
    assert result.steps == 6 and result.data_wait_ms >= 15  # it slept 20 ms per batch
    assert result.pipeline_efficiency < 0.5  # a tiny step cannot hide 20 ms of waiting
    assert "INPUT-BOUND" in diagnose_pipeline(result, num_workers=0, cpu_cores=4)
    assert "more DataLoader workers (0 now, 4 cores)" in diagnose_pipeline(result, num_workers=0, cpu_cores=4)


def test_doctor_says_compute_bound_when_data_is_ready():
    result = PipelineResult(95.0, 97.0, 0.98, 0.5, 40.0, 10, 100.0, None)
    assert "COMPUTE-BOUND" in diagnose_pipeline(result)
    assert abs(result.data_wait_fraction - 0.5 / 40.5) < 1e-9


def test_peak_rss_sees_a_large_allocation():
    reset_peak_rss()
    before = peak_rss_bytes()
    block = np.ones(200 * 2**20, dtype=np.uint8)  # 200 MiB, touched
    after = peak_rss_bytes()
    assert before is not None and after - before > 150 * 2**20
    del block


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


def test_sweep_returns_one_row_per_setting(tmp_path):
    from helpers.datasets import LazyCropSRDataset

    dataset = LazyCropSRDataset(_photos(tmp_path), scale=2, hr_crop=32)
    grid = loader_settings_grid(workers=(0, 1), pin_memory=(False,), prefetch=(2,), persistent=(True, False))
    assert len(grid) == 3
    rows = sweep_loader_settings(dataset, grid, batch_size=2, batches=2)
    assert [r["num_workers"] for r in rows] == [0, 1, 1] and all(r["samples_per_s"] > 0 for r in rows)


def test_samples_per_epoch_draws_more_than_the_dataset(tmp_path):
    from helpers.datasets import LazyCropSRDataset

    dataset = LazyCropSRDataset(_photos(tmp_path), scale=2, hr_crop=32, seed=0)
    loader = make_loader(dataset, batch_size=4, samples_per_epoch=20)
    assert len(loader) == 5


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


def test_background_prefetcher_yields_everything_in_order_and_reraises():
    from helpers.loading import BackgroundPrefetcher

    assert list(BackgroundPrefetcher(range(10), depth=2)) == list(range(10))

    def broken():
        yield 1
        raise OSError("disk went away")

    items = iter(BackgroundPrefetcher(broken()))
    assert next(items) == 1
    try:
        next(items)
    except OSError as error:
        assert "disk went away" in str(error)
    else:
        raise AssertionError("the producer's error was swallowed")


def test_background_prefetcher_stops_when_the_consumer_stops():
    import threading

    from helpers.loading import BackgroundPrefetcher

    before = threading.active_count()
    iterator = iter(BackgroundPrefetcher(iter(range(10**9)), depth=2))
    assert next(iterator) == 0
    iterator.close()  # the consumer walks away mid-stream
    assert threading.active_count() == before


def test_jpeg_decode_benchmark_measures_cpu_decoders_and_explains_skips(tmp_path):
    from helpers.bench import jpeg_decode_benchmark

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
