"""08's decoder comparison: every decoder timed in interleaved rounds with a median and a range, the device
synchronised before every timed pass starts and stops (precision.interleaved_times), the load beside each row, and
the table says what each rate includes, its range, and when the machine was busy."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from helpers import precision
from helpers.course.decoders import _interleaved, decode_table, jpeg_decode_benchmark
from helpers.loadmeter import LoadMeter


def test_rounds_are_interleaved_and_a_gpu_decoder_is_synchronised_around_each_timed_pass(monkeypatch):
    events: list[str] = []
    clock = iter(float(t) for t in range(1000))
    monkeypatch.setattr(precision.time, "perf_counter", lambda: events.append("clock") or next(clock))
    monkeypatch.setattr(precision, "_synchronize", lambda device: events.append(f"sync {device}"))
    gpu = torch.device("cuda:0")
    rows = _interleaved(
        [("a", "", lambda: events.append("a")), ("g", "", lambda: events.append("g"))], images=4, repeats=3, device=gpu
    )
    # warm-ups first (the GPU one waited for), then rounds: a then g, three times
    assert events[:3] == ["a", "g", "sync cuda:0"]
    timed = [e for e in events[3:] if e in ("a", "g")]
    assert timed == ["a", "g"] * 3
    for i, event in enumerate(events):
        if event == "g" and i > 2:
            assert events[i + 1] == "sync cuda:0" and events[i + 2] == "clock"  # queued work counted before the stop
    assert [row["decoder"] for row in rows] == ["a", "g"] and all(row["rounds"] == 3 for row in rows)
    assert all(row["images_per_s_range"][0] <= row["images_per_s"] <= row["images_per_s_range"][1] for row in rows)
    assert all("load" in row and "load_note" in row for row in rows)


def test_the_median_and_range_come_from_each_decoders_own_rounds(monkeypatch):
    seconds = {"a": iter([0.0, 1.0, 4.0, 0.5]), "b": iter([0.0, 2.0, 8.0, 1.0])}  # warm-up first, then 3 rounds
    now = [0.0]
    monkeypatch.setattr(precision.time, "perf_counter", lambda: now[0])

    def decoder(name):
        def one_pass():
            now[0] += next(seconds[name])

        return (name, "", one_pass)

    a, b = _interleaved([decoder("a"), decoder("b")], images=8, repeats=3, device=torch.device("cpu"))
    assert a["images_per_s"] == 8 / 1.0 and a["images_per_s_range"] == (8 / 4.0, 8 / 0.5)
    assert b["images_per_s"] == 8 / 2.0 and b["images_per_s_range"] == (8 / 8.0, 8 / 1.0)


def test_the_table_shows_ranges_skips_and_a_busy_machine():
    def row(name, rate, spread, rounds, other):
        note = f"other processes used {other} of 2 cores" if other else ""
        load = {"other_cores": other, "cores": 2}
        fields = {"decoder": name, "includes": name + " work", "images_per_s": rate, "images_per_s_range": spread}
        return fields | {"rounds": rounds, "load": load, "load_note": note}

    rows = [
        row("PIL", 400.0, (380.0, 420.0), 3, 0.9),
        row("tv", 900.0, (900.0, 900.0), 1, 0.0),
        {"decoder": "DALI", "images_per_s": None, "note": "skipped: DALI is not installed"},
    ]
    table = decode_table(rows)
    assert "| PIL | 400 (380–420) | PIL work |" in table and "| tv | 900 (one round: no range) | tv work |" in table
    assert "| DALI | | skipped: DALI is not installed |" in table
    assert table.endswith(
        "other processes used 0.9 of 2 cores while 1 of the 2 decoders ran; these rates include that load."
    )
    rows[0]["load_note"] = ""
    assert "busy" not in decode_table(rows)


def test_each_row_carries_the_load_measured_while_it_ran():
    machine = iter(float(t) for t in range(0, 1000, 3))  # the machine's CPU seconds grow 3 per reading...
    tree = iter(float(t) for t in range(1000))  # ...this process tree's 1: others used 2 s per 1 s of wall time
    wall = iter(float(t) for t in range(1000))

    def busy_meter():
        return LoadMeter(machine=lambda: next(machine), tree=lambda: next(tree), wall=lambda: next(wall), cores=4)

    (row,) = _interleaved(
        [("a", "", lambda: None)], images=1, repeats=2, device=torch.device("cpu"), new_meter=busy_meter
    )
    assert row["load"]["other_cores"] == 2.0 and row["load"]["busy"]
    assert row["load_note"].startswith("other processes used 2.0 of 4 cores")
    (quiet,) = _interleaved([("a", "", lambda: None)], images=1, repeats=2, device=torch.device("cpu"))
    assert "load" in quiet


def test_dali_runs_one_batch_at_a_time_when_asked_not_ahead_in_the_background(monkeypatch, tmp_path):
    """DALI's default pipelined, asynchronous executor decodes the next batches (prefetch_queue_depth=2) while the
    other decoders are timed; the benchmark's pipeline makes each batch inside run()."""
    import sys
    import types

    from helpers.course.decoders import _dali_decoder

    made: list[dict] = []

    def pipeline_def(**options):
        made.append(options)

        def wrap(function):
            return lambda: types.SimpleNamespace(build=lambda: None, run=lambda: "outputs")

        return wrap

    dali = types.ModuleType("nvidia.dali")
    dali.fn, dali.pipeline_def = types.SimpleNamespace(), pipeline_def
    monkeypatch.setitem(sys.modules, "nvidia", types.ModuleType("nvidia"))
    monkeypatch.setitem(sys.modules, "nvidia.dali", dali)
    name, _, run = _dali_decoder([tmp_path / "a.jpg"], torch.device("cuda", 0))
    assert name.startswith("NVIDIA DALI") and run() == "outputs"
    (options,) = made
    assert (options["prefetch_queue_depth"], options["exec_pipelined"], options["exec_async"]) == (1, False, False)


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
