"""The GPU check's summary: it reads what the check left (steps, JUnit XML, logs, benchmarks, speed-ups, a time-boxed
training run), says what ran where with every table and every failure's traceback, lists every notebook (one that
did not run fails the check), fails when a required step did, never lets a rehearsal's CUDA step pass, and publishes
only a real GPU run's file."""

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
<testcase classname="tests.cuda.test_decode" name="test_nvjpeg" time="0.3"><failure message="#x1B[91mmean difference 3.1#x1B[0m&#10;second line">Traceback (most recent call last):&#10;  File "tests/cuda/test_decode.py", line 40&#10;AssertionError: mean difference 3.1</failure></testcase>
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
def notebooks(tmp_path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in ("00_setup_and_data.ipynb", "03_mixed_precision.ipynb"):
        (folder / name).write_text("{}")
    return folder


@pytest.fixture
def work(tmp_path):
    """The check's two folders: OUT (steps, logs, JUnit, benchmarks: what comes back from a GPU machine) and WORK."""
    out, work = tmp_path / "out", tmp_path / "work"
    (out / "logs").mkdir(parents=True)
    (out / "junit").mkdir()
    (out / "steps.tsv").write_text(
        _steps(
            ("install", "skipped", "", 0, 0, "optional", "no --wheelhouse", "cpu"),
            ("cuda-tests", "failed", 1, 40, 150, "required", "the CUDA tests (pytest tests/cuda -m cuda)", "cuda"),
            ("nbval-00", "passed", 0, 30, 180, "required", "nbval, smoke profile: 00_setup_and_data.ipynb", "cuda"),
            ("nbval-03", "passed", 0, 50, 180, "required", "nbval, smoke profile: 03_mixed_precision.ipynb", "cuda"),
            ("bench-sr", "passed", 0, 70, 150, "required", "python -m helpers.course.bench sr --profile full", "cuda"),
            ("train-cifar", "time-boxed", 124, 180, 180, "timebox", "python -m helpers.course.train cifar", "cuda"),
        )
    )
    (out / "junit" / "cuda-tests.xml").write_text(JUNIT_TESTS)
    (out / "junit" / "nbval-00.xml").write_text(
        JUNIT_NBVAL.split('<testcase classname="notebooks.03')[0] + "</testsuite></testsuites>"
    )
    (out / "junit" / "nbval-03.xml").write_text(JUNIT_NBVAL)
    (out / "bench-sr.json").write_text(
        json.dumps(
            {"ladder": "sr", "profile": "full", "label": "SR ladder, x4", "data": "BSDS300 stand-in", "rungs": [RUNG]}
        )
    )
    (work / "runs" / "cifar").mkdir(parents=True)
    history = [
        {"epoch": 1, "train_loss": 1.9, "top1": 0.41, "trained_seconds": 12.5, "per_image_x": [1]},
        {"epoch": 2, "train_loss": 1.2, "top1": 0.66, "trained_seconds": 24.0},
    ]
    (work / "runs" / "cifar" / "history.json").write_text(json.dumps(history))
    (out / "logs" / "train-cifar.log").write_text(
        "ResNet18 (CIFAR stem), 5000 images\nprecision: bf16: fastest\nnoise\ninterrupted: checkpoint in last.pt\n"
    )
    return out, work


def _collect(work, notebooks, **options):
    out, folder = work
    options = {"rehearsal": False, "wall_seconds": 470, "host": GPU_HOST, **options}
    return gpu_summary.collect(out, work=folder, notebooks=notebooks, **options)


def test_the_summary_reads_every_table_and_says_what_failed(work, notebooks, monkeypatch):
    monkeypatch.setenv("GPU_CHECK_COMMIT", "0123456789abcdef")
    summary = _collect(work, notebooks)
    cuda = summary["tests"]["cuda-tests"]
    assert (cuda["passed"], cuda["failed"], cuda["skipped"]) == (1, 1, 1)
    assert cuda["failures"] == ["tests.cuda.test_decode::test_nvjpeg: mean difference 3.1"]  # colours stripped
    assert cuda["skip_reasons"] == {"CUDA is not available: no GPU": 1}
    assert summary["notebooks"] == [
        {"notebook": "00_setup_and_data.ipynb", "status": "passed", "step": "nbval-00", "cells": 2, "failed_cells": 0,
         "seconds": 30},
        {"notebook": "03_mixed_precision.ipynb", "status": "passed", "step": "nbval-03", "cells": 1, "failed_cells": 0,
         "seconds": 50},
    ]  # fmt: skip
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


def test_every_failure_comes_with_its_traceback_from_junit_or_the_log(work, notebooks):
    out, _ = work
    with (out / "steps.tsv").open("a") as steps:
        steps.write(
            _steps(("bench-cifar", "timed-out", 124, 90, 90, "required", "python -m helpers.course.bench", "cuda"))
        )
    (out / "logs" / "bench-cifar.log").write_text("".join(f"line {i}\n" for i in range(100)) + "RuntimeError: boom\n")
    failures = _collect(work, notebooks)["failures"]
    assert [(f["step"], f["where"]) for f in failures] == [
        ("cuda-tests", "tests.cuda.test_decode::test_nvjpeg"),
        ("bench-cifar", "the end of its log"),
    ]
    assert failures[0]["traceback"].endswith("line 40\nAssertionError: mean difference 3.1")
    assert "Traceback (most recent call last)" in failures[0]["traceback"]
    log = failures[1]["traceback"].splitlines()
    assert log[0] == "[41 earlier lines left out]" and log[-1] == "RuntimeError: boom" and len(log) == 61
    page = gpu_summary.markdown(_collect(work, notebooks))
    assert "### bench-cifar: the end of its log\n\n```\n[41 earlier lines left out]" in page


def test_a_notebook_that_did_not_run_fails_the_check(work, notebooks):
    (notebooks / "05_train_super_resolution.ipynb").write_text("{}")  # a notebook the check has no step for
    summary = _collect(work, notebooks)
    assert summary["notebooks"][-1] == {
        "notebook": "05_train_super_resolution.ipynb",
        "status": "not run",
        "step": None,
        "cells": None,
        "failed_cells": None,
        "seconds": None,
    }
    assert summary["verdict"] == "failed: cuda-tests, 05_train_super_resolution.ipynb (not run)"
    assert "| 05_train_super_resolution.ipynb | not run | — | — | — |" in gpu_summary.markdown(summary)


def test_a_test_run_where_nothing_passed_is_no_pass(work, notebooks):
    out, _ = work
    (out / "junit" / "cuda-tests.xml").write_text(
        JUNIT_TESTS.replace('<testcase classname="tests.cuda.test_step" name="test_fp16" time="0.5"/>', "")
        .replace(
            '<testcase classname="tests.cuda.test_decode" name="test_nvjpeg" time="0.3"><failure',
            '<testcase classname="tests.cuda.test_decode" name="test_nvjpeg" time="0.3"><skipped',
        )
        .replace("</failure>", "</skipped>")
    )
    steps = (out / "steps.tsv").read_text().replace("cuda-tests\tfailed\t1", "cuda-tests\tpassed\t0")
    (out / "steps.tsv").write_text(steps)
    on_gpu = _collect(work, notebooks)
    cuda = next(s for s in on_gpu["steps"] if s["name"] == "cuda-tests")
    assert cuda["status"] == "failed" and "no test passed (2 skipped: CUDA is not available: no GPU" in cuda["note"]
    rehearsed = _collect(work, notebooks, rehearsal=True, host=CPU_HOST)
    assert next(s for s in rehearsed["steps"] if s["name"] == "cuda-tests")["status"] == "skipped"


def test_a_rehearsal_never_reports_a_cuda_step_as_passed(work, notebooks):
    summary = _collect(work, notebooks, rehearsal=True, host=CPU_HOST)
    statuses = {s["name"]: s["status"] for s in summary["steps"]}
    assert statuses == {
        "install": "skipped",  # a CPU step keeps its own status
        "cuda-tests": "failed",  # a failure stays a failure
        "nbval-00": "skipped",
        "nbval-03": "skipped",
        "bench-sr": "skipped",
        "train-cifar": "skipped",
    }
    assert all("not checked on a GPU" in s["note"] for s in summary["steps"] if s["name"] in ("bench-sr", "nbval-00"))
    assert summary["verdict"] == "failed: cuda-tests"
    # the verdict itself refuses a CUDA step that says it passed (a step that bypassed `settle`)
    steps = [{**s, "status": "passed"} if s["name"] == "bench-sr" else s for s in summary["steps"]]
    assert "bench-sr (passed in a rehearsal)" in gpu_summary.verdict(steps, [], rehearsal=True)


def test_a_clean_rehearsal_passes_as_a_rehearsal(work, notebooks):
    out, _ = work
    (out / "steps.tsv").write_text(
        (out / "steps.tsv").read_text().replace("cuda-tests\tfailed\t1", "cuda-tests\tpassed\t0")
    )
    (out / "junit" / "cuda-tests.xml").unlink()
    summary = _collect(work, notebooks, rehearsal=True, host=CPU_HOST)
    assert summary["verdict"] == "rehearsal passed: every step ran, its 5 CUDA steps skipped (no GPU here)"
    assert gpu_summary.passed(summary) and summary["publish_as"] is None


def test_a_summary_written_between_steps_says_it_is_incomplete(work, notebooks):
    summary = _collect(work, notebooks, final=False)
    assert summary["verdict"] == "incomplete: the check stopped after train-cifar; failed: cuda-tests"
    assert "- **Incomplete**" in gpu_summary.markdown(summary)


def test_the_markdown_says_what_ran_where_with_every_table(work, notebooks, monkeypatch):
    monkeypatch.setenv("GPU_CHECK_COMMIT", "0123456789abcdef")
    out, _ = work
    with (out / "steps.tsv").open("a") as steps:
        steps.write(
            _steps(("compiler", "skipped", "", 0, 0, "optional", "no host C compiler ($CC, gcc or clang)", "cpu"))
        )
    (out / "speedups.json").write_text(json.dumps(SPEEDUPS))
    page = gpu_summary.markdown(_collect(work, notebooks))
    assert page.startswith("# GPU check on NVIDIA H200, 20")
    assert "NVIDIA H200 (139.8 GiB, capability 9.0, driver 580.159.03)" in page and "torch 2.11.0+cu130" in page
    assert "0123456789abcdef" in page and "no result here is a BSD100 or CIFAR-10 result" in page
    assert "| decoded uint8 cache, batch crops | 41,234 | 52.1 | 20,000 | 0.97 | 0.3 | 1.2 | 812 | 2,048 |" in page
    assert "| 00_setup_and_data.ipynb | passed | 2 | 0 | 30 |" in page and "2 epoch(s) finished." in page
    assert "| train-cifar | time-boxed | 180 | 180 | timebox | cuda |" in page
    assert "cuda-tests: FAILED tests.cuda.test_decode::test_nvjpeg" in page
    assert "- **torch.compile**: no host C compiler ($CC, gcc or clang)" in page
    assert "| plain step | 2.00 (1.90–2.40) | 0.0 | the baseline | nothing |" in page
    assert "| torch.compile | not measured: no host C compiler: Triton needs one |" in page
    assert "| channels_last | 1.50 (1.40–1.60) | 0.1 | 3 | channels_last |" in page


SPEEDUPS = {
    "label": "step-side speed-ups, small CNN, batch 256, 32 px, bf16",
    "rows": [
        {"name": "plain step", "notes": [], "step_ms": 2.0, "step_ms_range": [1.9, 2.4], "startup_s": 0.0},
        {"name": "channels_last", "notes": ["channels_last"], "step_ms": 1.5, "step_ms_range": [1.4, 1.6],
         "startup_s": 0.1, "pays_off_after": 3},
        {"name": "torch.compile", "skipped": "no host C compiler: Triton needs one"},
    ],
}  # fmt: skip


def test_a_rehearsal_says_so_and_cannot_be_published(work, notebooks, tmp_path):
    summary = _collect(work, notebooks, rehearsal=True, wall_seconds=900, host=CPU_HOST)
    assert summary["publish_as"] is None
    page = gpu_summary.markdown(summary)
    assert page.startswith("# GPU check, rehearsal without CUDA") and "no number below is a GPU measurement" in page
    out = tmp_path / "published"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError, match="rehearsal without a GPU"):
        gpu_summary.publish(out, tmp_path / "results")
    (out / "summary.json").write_text(json.dumps({**_collect(work, notebooks, final=False)}))
    with pytest.raises(ValueError, match="incomplete"):
        gpu_summary.publish(out, tmp_path / "results")
    assert not (tmp_path / "results").exists()


def test_a_gpu_run_is_published_by_gpu_and_date_and_gives_the_readme_its_table(work, notebooks, tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_CHECK_COMMIT", "0123456789abcdef")
    summary = _collect(work, notebooks)
    out = tmp_path / "published"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps(summary))
    (out / "summary.md").write_text(gpu_summary.markdown(summary))
    copied = gpu_summary.publish(out, tmp_path / "results")
    assert [p.name for p in copied] == [f"{summary['publish_as']}.json", f"{summary['publish_as']}.md"]
    table = gpu_summary.readme_table(copied[0])
    assert "NVIDIA H200 (driver 580.159.03, torch 2.11.0+cu130, 16 CPU cores), commit 0123456789ab" in table
    assert f"File: `{copied[0].as_posix()}`" in table and "none of these is a BSD100 or CIFAR-10 result" in table
    assert "41,234 samples/s alone" in table and "2 epochs in 24 s, top-1 66.0% on the stand-in" in table


def test_write_reads_the_machine_once_and_rewrites_the_summary(work, notebooks, monkeypatch):
    out, folder = work
    calls = []
    monkeypatch.setattr(gpu_summary, "machine", lambda: calls.append(1) or GPU_HOST)
    monkeypatch.setattr(gpu_summary, "REPO", notebooks.parent)
    monkeypatch.setattr(gpu_summary.collect, "__kwdefaults__", {"final": True, "notebooks": notebooks})
    assert gpu_summary.main(["write", "--work", str(folder), "--out", str(out)]) == 0  # between steps: no verdict yet
    assert gpu_summary.main(["write", "--work", str(folder), "--out", str(out), "--final"]) == 1  # cuda-tests failed
    assert calls == [1] and json.loads((out / "machine.json").read_text()) == GPU_HOST
    assert json.loads((out / "summary.json").read_text())["verdict"] == "failed: cuda-tests"


def test_a_malformed_step_line_is_a_clear_error(tmp_path):
    (tmp_path / "steps.tsv").write_text("install\tpassed\n")
    with pytest.raises(ValueError, match="a step line has 2 fields, expected 8"):
        gpu_summary.read_steps(tmp_path / "steps.tsv")
    (tmp_path / "steps.tsv").write_text("install\tpassed\t0\t1\t2\trequired\twhat\n")  # before `needs`: a CPU step
    assert gpu_summary.read_steps(tmp_path / "steps.tsv")[0]["needs"] == "cpu"


def test_the_slug_names_files_safely():
    assert gpu_summary.slug("NVIDIA H200") == "nvidia-h200"
    assert gpu_summary.slug("NVIDIA GeForce RTX 4090 (24 GB)") == "nvidia-geforce-rtx-4090-24-gb"


def test_the_summary_records_profile_device_and_each_benchmarks_load(work, notebooks, monkeypatch):
    monkeypatch.setenv("GPU_CHECK_COMMIT", "0123456789abcdef")
    rung = {**RUNG, "loader_samples_per_s": RUNG["samples_per_s"], "loader_vs_first": 52.1}
    del rung["samples_per_s"], rung["speedup_vs_first"]  # the names bench JSON uses now
    load = {"other_cores_max": 0.8, "cores": 16, "busy": True, "load_average_max": 2.0}
    (work[0] / "bench-sr.json").write_text(
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
    summary = _collect(work, notebooks)
    assert summary["profile"] == "full" and summary["device"] == "NVIDIA H200" and summary["load"] == {"sr": load}
    page = gpu_summary.markdown(summary)
    assert (
        "- **Profile**: full; **device**: NVIDIA H200; **load**: sr: other processes used up to 0.8 of 16 cores "
        "(busy: its numbers include that load)" in page
    )
    assert "| decoded uint8 cache, batch crops | 41,234 | 52.1 | 20,000 | 0.97 |" in page
