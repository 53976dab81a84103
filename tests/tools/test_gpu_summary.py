"""The GPU check's summary: it reads what the check left (steps, JUnit XML, benchmarks, a time-boxed training run),
says what ran where with every table, fails when a required step did, and publishes only a real GPU run's file."""

from __future__ import annotations

import json

import gpu_summary
import pytest

GPU_HOST = {
    "gpu": "NVIDIA H200",
    "driver": "580.159.03",
    "gpu_memory_gib": 139.8,
    "cuda_capability": "9.0",
    "gpu_count": 1,
    "torch": "2.11.0+cu130",
    "cuda": "13.0",
    "cudnn": 91300,
    "torchvision": "0.26.0",
    "kornia": "0.9.0",
    "nbval": "0.11.0",
    "python": "3.12.3",
    "platform": "Linux-6.18-x86_64",
    "cpu_cores": 16,
    "memory_gib": 125.0,
}
CPU_HOST = {**GPU_HOST, "gpu": None, "driver": None, "gpu_memory_gib": None, "cuda_capability": None, "gpu_count": 0}

JUNIT_TESTS = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.cuda.test_step" name="test_fp16" time="0.5"/>
<testcase classname="tests.cuda.test_step" name="test_bf16" time="0.1"><skipped type="pytest.skip"
 message="CUDA is not available: no GPU">skip</skipped></testcase>
<testcase classname="tests.cuda.test_decode" name="test_nvjpeg" time="0.3"><failure message="#x1B[91mmean difference 3.1#x1B[0m&#10;second line">trace</failure></testcase>
</testsuite></testsuites>"""
JUNIT_NBVAL = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="notebooks.00_setup_and_data.ipynb" name="Cell 0" time="1.5"/>
<testcase classname="notebooks.00_setup_and_data.ipynb" name="Cell 1" time="2.0"/>
<testcase classname="notebooks.03_mixed_precision.ipynb" name="Cell 0" time="4.0"/>
</testsuite></testsuites>"""
RUNG = {
    "name": "decoded uint8 cache, batch crops",
    "samples_per_s": 41234.5,
    "speedup_vs_first": 52.1,
    "fed_samples_per_s": 20000.0,
    "pipeline_efficiency": 0.97,
    "data_wait_ms": 0.3,
    "compute_ms": 1.2,
    "peak_device_mib": 812.0,
    "peak_rss_mib": 2048.0,
}


def _steps(*lines: tuple) -> str:
    return "".join("\t".join(str(v) for v in line) + "\n" for line in lines)


@pytest.fixture
def work(tmp_path):
    folder = tmp_path / "work"
    (folder / "logs").mkdir(parents=True)
    (folder / "steps.tsv").write_text(
        _steps(
            ("install", "skipped", "", 0, 0, "optional", "no --wheelhouse"),
            ("cuda-tests", "failed", 1, 40, 150, "required", "the CUDA tests (pytest -m cuda)"),
            ("nbval-0", "passed", 0, 80, 150, "required", "nbval, smoke profile"),
            ("unit-tests", "timed-out", 124, 150, 150, "optional", "the other unit tests"),
            ("bench-sr", "passed", 0, 70, 150, "required", "python -m helpers.bench sr --profile full"),
            ("train-cifar", "time-boxed", 124, 180, 180, "timebox", "python -m helpers.train cifar --profile full"),
        )
    )
    (folder / "junit-cuda-tests.xml").write_text(JUNIT_TESTS)
    (folder / "junit-nbval-0.xml").write_text(JUNIT_NBVAL)
    (folder / "bench-sr.json").write_text(
        json.dumps(
            {"ladder": "sr", "profile": "full", "label": "SR ladder, x4", "data": "BSDS300 stand-in", "rungs": [RUNG]}
        )
    )
    (folder / "runs" / "cifar").mkdir(parents=True)
    history = [
        {"epoch": 1, "train_loss": 1.9, "top1": 0.41, "trained_seconds": 12.5, "per_image_x": [1]},
        {"epoch": 2, "train_loss": 1.2, "top1": 0.66, "trained_seconds": 24.0},
    ]
    (folder / "runs" / "cifar" / "history.json").write_text(json.dumps(history))
    (folder / "logs" / "train-cifar.log").write_text(
        "ResNet18 (CIFAR stem), 5000 images\nprecision: bf16: fastest\nnoise\ninterrupted: checkpoint in last.pt\n"
    )
    return folder


def test_the_summary_reads_every_table_and_says_what_failed(work, monkeypatch):
    monkeypatch.setenv("GPU_CHECK_COMMIT", "0123456789abcdef")
    summary = gpu_summary.collect(work, dry_run=False, wall_seconds=470, host=GPU_HOST)
    cuda = summary["tests"]["cuda-tests"]
    assert (cuda["passed"], cuda["failed"], cuda["skipped"]) == (1, 1, 1)
    assert cuda["failures"] == ["tests.cuda.test_decode::test_nvjpeg: mean difference 3.1"]  # colours stripped
    assert cuda["skip_reasons"] == {"CUDA is not available: no GPU": 1}
    assert summary["notebooks"] == [
        {"notebook": "00_setup_and_data.ipynb", "cells": 2, "failed_cells": 0, "seconds": 3.5},
        {"notebook": "03_mixed_precision.ipynb", "cells": 1, "failed_cells": 0, "seconds": 4.0},
    ]
    training = summary["training"]
    assert training["epochs_finished"] == 2 and "per_image_x" not in training["history"][0]
    assert training["log"] == [
        "ResNet18 (CIFAR stem), 5000 images",
        "precision: bf16: fastest",
        "interrupted: checkpoint in last.pt",
    ]
    # a failed required step fails the check; an optional step out of time and the time box do not
    assert summary["verdict"] == "failed: cuda-tests"
    assert summary["commit"] == "0123456789abcdef" and summary["publish_as"].startswith("nvidia-h200-20")


def test_the_markdown_says_what_ran_where_with_every_table(work, monkeypatch):
    monkeypatch.setenv("GPU_CHECK_COMMIT", "0123456789abcdef")
    page = gpu_summary.markdown(gpu_summary.collect(work, dry_run=False, wall_seconds=470, host=GPU_HOST))
    assert page.startswith("# GPU check on NVIDIA H200, 20")
    assert "NVIDIA H200 (139.8 GiB, capability 9.0, driver 580.159.03)" in page and "torch 2.11.0+cu130" in page
    assert "0123456789abcdef" in page and "no result here is a BSD100 or CIFAR-10 result" in page
    assert "| decoded uint8 cache, batch crops | 41,234 | 52.1 | 20,000 | 0.97 | 0.3 | 1.2 | 812 | 2,048 |" in page
    assert "| 00_setup_and_data.ipynb | 2 | 0 | 3.5 |" in page and "2 epoch(s) finished." in page
    assert "| train-cifar | time-boxed | 180 | 180 | timebox |" in page
    assert "cuda-tests: FAILED tests.cuda.test_decode::test_nvjpeg" in page


def test_a_dry_run_says_so_and_cannot_be_published(work, tmp_path):
    (work / "steps.tsv").write_text(_steps(("cuda-tests", "passed", 0, 5, 1800, "required", "the CUDA tests")))
    summary = gpu_summary.collect(work, dry_run=True, wall_seconds=900, host=CPU_HOST)
    assert summary["verdict"] == "passed" and summary["publish_as"] is None
    page = gpu_summary.markdown(summary)
    assert page.startswith("# GPU check, dry run without CUDA") and "no number below is a GPU measurement" in page
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError, match="dry run without a GPU"):
        gpu_summary.publish(out, tmp_path / "results")
    assert not (tmp_path / "results").exists()


def test_a_gpu_run_is_published_by_gpu_and_date_and_gives_the_readme_its_table(work, tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_CHECK_COMMIT", "0123456789abcdef")
    summary = gpu_summary.collect(work, dry_run=False, wall_seconds=470, host=GPU_HOST)
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps(summary))
    (out / "summary.md").write_text(gpu_summary.markdown(summary))
    copied = gpu_summary.publish(out, tmp_path / "results")
    assert [p.name for p in copied] == [f"{summary['publish_as']}.json", f"{summary['publish_as']}.md"]
    table = gpu_summary.readme_table(copied[0])
    assert "NVIDIA H200 (driver 580.159.03, torch 2.11.0+cu130, 16 CPU cores), commit 0123456789ab" in table
    assert f"File: `{copied[0].as_posix()}`" in table and "none of these is a BSD100 or CIFAR-10 result" in table
    assert "41,234 samples/s alone" in table and "2 epochs in 24 s, top-1 66.0% on the stand-in" in table


def test_a_malformed_step_line_is_a_clear_error(tmp_path):
    (tmp_path / "steps.tsv").write_text("install\tpassed\n")
    with pytest.raises(ValueError, match="a step line has 2 fields, expected 7"):
        gpu_summary.read_steps(tmp_path / "steps.tsv")


def test_the_slug_names_files_safely():
    assert gpu_summary.slug("NVIDIA H200") == "nvidia-h200"
    assert gpu_summary.slug("NVIDIA GeForce RTX 4090 (24 GB)") == "nvidia-geforce-rtx-4090-24-gb"


def test_the_summary_records_profile_device_and_each_benchmarks_load(work, monkeypatch):
    monkeypatch.setenv("GPU_CHECK_COMMIT", "0123456789abcdef")
    rung = {**RUNG, "loader_samples_per_s": RUNG["samples_per_s"], "loader_vs_first": 52.1}
    del rung["samples_per_s"], rung["speedup_vs_first"]  # the names bench JSON uses now
    load = {"other_cores_max": 0.8, "cores": 16, "busy": True, "load_average_max": 2.0}
    (work / "bench-sr.json").write_text(
        json.dumps(
            {
                "ladder": "sr",
                "profile": "full",
                "label": "SR ladder, x4",
                "data": "BSDS300 stand-in",
                "rungs": [rung],
                "load": load,
            }
        )
    )
    summary = gpu_summary.collect(work, dry_run=False, wall_seconds=470, host=GPU_HOST)
    assert summary["profile"] == "full" and summary["device"] == "NVIDIA H200" and summary["load"] == {"sr": load}
    page = gpu_summary.markdown(summary)
    assert (
        "- **Profile**: full; **device**: NVIDIA H200; **load**: sr: other processes used up to 0.8 of 16 cores "
        "(busy: its numbers include that load)" in page
    )
    assert "| decoded uint8 cache, batch crops | 41,234 | 52.1 | 20,000 | 0.97 |" in page
