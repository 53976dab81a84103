"""The GPU check's report: one JSON and one markdown summary of what tools/gpu_check.sh ran, on which machine, at
which commit, with every failure's traceback and every table; and publishing a summary under results/, which is the
only way a GPU number may enter this repository (the README's GPU table is made from such a file).

    python tools/gpu_summary.py write --work WORK --out OUT [--rehearsal] [--wall SECONDS] [--final]
        read what the check left in OUT (steps.tsv, junit/, logs/, bench and speed-up JSON) and WORK (the training
        run's history) and write OUT/summary.json and OUT/summary.md; exit status 1 when a required step failed or
        did not finish (without --final, written between steps: the verdict says the check is still incomplete)
    python tools/gpu_summary.py publish OUT [--results results/]
        copy OUT/summary.{json,md} to results/<gpu>-<date>.{json,md}; refused for a rehearsal (no GPU numbers)
    python tools/gpu_summary.py readme-table results/<gpu>-<date>.json
        the markdown table for a results page (results/), taken from that file
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"(?:\x1b|#x1B)\[[0-9;]*m")  # nbval colours its messages (JUnit XML spells ESC "#x1B")
STEP_FIELDS = ("name", "status", "exit_code", "seconds", "limit_seconds", "mode", "note", "needs")
# required: must pass; optional: a failure counts, running out of time does not; timebox: stopping at the limit
# is the plan (the training run), and what finished before it is the result
MODES = ("required", "optional", "timebox")
# needs: "cuda" for a step that checks the GPU path (a rehearsal reports it as skipped, never as passed), else "cpu"
TRACEBACK_LINES = 60  # the end of a failure's text kept in the summary (the full text is in OUT/junit and OUT/logs)


# --- reading what the check left -----------------------------------------------------------------------------------


def read_steps(path: Path) -> list[dict[str, Any]]:
    """The steps gpu_check.sh recorded, one tab-separated line each, in the order they finished."""
    steps = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        values = line.split("\t")
        if len(values) == len(STEP_FIELDS) - 1:  # written before steps said what they need
            values.append("cpu")
        if len(values) != len(STEP_FIELDS):
            raise ValueError(f"{path}: a step line has {len(values)} fields, expected {len(STEP_FIELDS)}: {line!r}")
        step = dict(zip(STEP_FIELDS, values))
        step["exit_code"] = int(step["exit_code"]) if step["exit_code"] else None
        step["seconds"], step["limit_seconds"] = int(step["seconds"]), int(step["limit_seconds"])
        steps.append(step)
    return steps


def read_junit(path: Path) -> dict[str, Any]:
    """Counts, failures (test and first message line, and each one's traceback) and skip reasons of one pytest run's
    JUnit XML."""
    root = ElementTree.parse(path).getroot()
    cases = root.iter("testcase")
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failures: list[str] = []
    tracebacks: list[dict[str, str]] = []
    skips: dict[str, int] = {}
    by_file: dict[str, dict[str, Any]] = {}
    for case in cases:
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                outcome = {"failure": "failed", "error": "errors", "skipped": "skipped"}[tag]
                message = ANSI.sub("", found.get("message") or found.text or "").strip().splitlines()
                if tag == "skipped":
                    reason = message[0] if message else "no reason given"
                    skips[reason] = skips.get(reason, 0) + 1
                else:
                    failures.append(f"{name}: {message[0] if message else tag}"[:300])
                    text = ANSI.sub("", "\n".join(t for t in (found.get("message"), found.text) if t)).strip()
                    tracebacks.append({"where": name, "traceback": last_lines(text)})
                break
        counts[outcome] += 1
        source = by_file.setdefault(
            case.get("file") or case.get("classname", ""), {"cells": 0, "failed": 0, "seconds": 0.0}
        )
        source["cells"] += 1
        source["failed"] += outcome in ("failed", "errors")
        source["seconds"] += float(case.get("time") or 0)
    return {**counts, "failures": failures, "tracebacks": tracebacks, "skip_reasons": skips, "by_file": by_file}


def last_lines(text: str, lines: int = TRACEBACK_LINES) -> str:
    """The end of a traceback or a log (where the error is), with how many lines were left out before it."""
    kept = text.rstrip().splitlines()
    if len(kept) <= lines:
        return "\n".join(kept)
    return f"[{len(kept) - lines} earlier lines left out]\n" + "\n".join(kept[-lines:])


def log_tail(path: Path) -> str:
    """The end of a step's log, or a line saying it has none."""
    if not path.is_file():
        return f"(no log: {path.name} was not written)"
    return last_lines(ANSI.sub("", path.read_text(errors="replace"))) or f"({path.name} is empty)"


def notebook_rows(junit: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per notebook from an nbval run's JUnit results (nbval reports each cell as a test)."""
    rows = []
    for source, totals in sorted(junit["by_file"].items()):
        found = re.search(r"([^./\\]+\.ipynb)$", source)  # nbval's class name: notebooks.00_setup.ipynb
        name = found.group(1) if found else source
        rows.append(
            {
                "notebook": name,
                "cells": totals["cells"],
                "failed_cells": totals["failed"],
                "seconds": round(totals["seconds"], 1),
            }
        )
    return rows


def read_training(folder: Path, log: Path | None) -> dict[str, Any]:
    """What a (possibly time-boxed) training run finished: its history.json epochs and its log's headline lines."""
    history_path = folder / "history.json"
    history = json.loads(history_path.read_text()) if history_path.is_file() else []
    lines = log.read_text(errors="replace").splitlines() if log is not None and log.is_file() else []
    keep = ("precision:", "[smoke run", "ResNet18", "small CNN", "stand-in", "CIFAR-10", "after ", "interrupted")
    headline = [line.strip() for line in lines if line.strip().startswith(keep) or "process(es)" in line][:8]
    epochs = [{k: v for k, v in record.items() if not k.startswith("per_image")} for record in history]
    return {"epochs_finished": len(history), "history": epochs, "log": headline}


# --- the machine -------------------------------------------------------------------------------------------------


def _run(command: list[str]) -> str | None:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    """The GPU (name, driver, memory, capability), the software (torch, CUDA, cuDNN, ...) and the host's size."""
    import torch  # the summary still reads its inputs on a machine where torch is broken: import it here

    info: dict[str, Any] = {
        "gpu": None,
        "driver": None,
        "gpu_memory_gib": None,
        "cuda_capability": None,
        "gpu_count": 0,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "torchvision": _version("torchvision"),
        "kornia": _version("kornia"),
        "nbval": _version("nbval"),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "cpu_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(
            gpu=props.name,
            gpu_memory_gib=round(props.total_memory / 2**30, 1),
            gpu_count=torch.cuda.device_count(),
            cuda_capability=f"{props.major}.{props.minor}",
        )
        smi = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        info["driver"] = smi.splitlines()[0].strip() if smi else None
    return info


def commit() -> dict[str, Any]:
    """The commit checked (GPU_CHECK_COMMIT overrides, for copies of the tree without .git) and whether it was dirty."""
    given = os.environ.get("GPU_CHECK_COMMIT", "").strip()
    if given:
        return {"commit": given, "dirty": None, "source": "GPU_CHECK_COMMIT"}
    head = _run(["git", "-C", str(REPO), "rev-parse", "HEAD"])
    status = _run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"])
    return {"commit": head, "dirty": bool(status) if head else None, "source": "git" if head else "unknown"}


def slug(text: str) -> str:
    """A file-name-safe lower-case form: 'NVIDIA H200' -> 'nvidia-h200'."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


# --- the summary -------------------------------------------------------------------------------------------------


def settle(step: dict[str, Any], junit: dict[str, Any] | None, *, rehearsal: bool) -> dict[str, Any]:
    """The step's status as the summary reports it: a test run in which no test passed did not pass (every CUDA test
    skipped is a failure on a GPU), and in a rehearsal a CUDA step that ran without error is skipped, never passed."""
    step = dict(step)
    if junit is not None and step["status"] == "passed" and junit["passed"] == 0:
        reasons = "; ".join(junit["skip_reasons"]) or "nothing collected"
        step["status"] = "skipped" if rehearsal else "failed"
        step["note"] += f"; no test passed ({junit['skipped']} skipped: {reasons})"[:400]
    if rehearsal and step["needs"] == "cuda" and step["status"] in ("passed", "time-boxed"):
        step["status"] = "skipped"
        step["note"] += "; a rehearsal without CUDA: not checked on a GPU"
    return step


def notebook_table(steps: list[dict[str, Any]], runs: dict[str, dict[str, Any]], folder: Path) -> list[dict[str, Any]]:
    """One row per notebook in `folder`: the status of its own nbval step, nbval-NN (or "not run"), its cells and
    seconds."""
    by_number = {s["name"].removeprefix("nbval-"): s for s in steps if s["name"].startswith("nbval-")}
    rows = []
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        step = by_number.get(path.name[:2])
        cells = runs.get(path.name, {})
        rows.append(
            {
                "notebook": path.name,
                "status": step["status"] if step else "not run",
                "step": step["name"] if step else None,
                "cells": cells.get("cells"),
                "failed_cells": cells.get("failed_cells"),
                "seconds": step["seconds"] if step else None,
            }
        )
    return rows


def collect(
    out: Path,
    *,
    work: Path,
    rehearsal: bool,
    wall_seconds: int | None,
    host: dict[str, Any],
    final: bool = True,
    notebooks: Path = REPO / "notebooks",
) -> dict[str, Any]:
    """Everything the check ran, as one JSON-ready dict."""
    steps, tests, cells, failures = [], {}, {}, []
    for step in read_steps(out / "steps.tsv"):
        path = out / "junit" / f"{step['name']}.xml"
        results = read_junit(path) if path.is_file() else None
        step = settle(step, results, rehearsal=rehearsal)
        steps.append(step)
        if results is not None:
            if step["name"].startswith("nbval"):
                cells.update({row["notebook"]: row for row in notebook_rows(results)})
            results.pop("by_file")
            tests[step["name"]] = {k: v for k, v in results.items() if k != "tracebacks"}
        if step["status"] in ("failed", "timed-out"):
            log = {"where": "the end of its log", "traceback": log_tail(out / "logs" / f"{step['name']}.log")}
            failures += [{"step": step["name"], **found} for found in (results or {}).get("tracebacks") or [log]]
    benches = {}
    for name in ("sr", "cifar"):
        path = out / f"bench-{name}.json"
        if path.is_file():
            benches[name] = json.loads(path.read_text())
    speedups = json.loads((out / "speedups.json").read_text()) if (out / "speedups.json").is_file() else None
    training = read_training(work / "runs" / "cifar", out / "logs" / "train-cifar.log")
    notebook_list = notebook_table(steps, cells, notebooks)
    date = datetime.now(timezone.utc)
    compiler = next((s for s in steps if s["name"] == "compiler"), None)
    summary = {
        "what": "feeding-the-gpu GPU check (tools/gpu_check.sh)",
        "dry_run": rehearsal,  # the name results/ checks (tests/tools/test_results.py)
        "rehearsal": rehearsal,
        "final": final,
        "date": date.isoformat(timespec="seconds"),
        **commit(),
        "machine": host,
        "wall_seconds": wall_seconds,
        "data": "offline stand-ins (scikit-image photographs in the BSDS300 and CIFAR-10 formats): no result here "
        "is a BSD100 or CIFAR-10 result",
        "compiler": compiler["note"] if compiler else None,
        "steps": steps,
        "tests": tests,
        "notebooks": notebook_list,
        "failures": failures,
        "benches": benches,
        "speedups": speedups,
        "training": training,
        "verdict": verdict(steps, notebook_list, rehearsal=rehearsal, final=final),
        # provenance beside the commit: the benchmarks' profile, the device, and the load meter of each benchmark
        "profile": ", ".join(sorted({str(b.get("profile")) for b in benches.values()})) or None,
        "device": host.get("gpu") or "cpu",
        "load": {name: b.get("load") for name, b in benches.items()},
        "publish_as": None if rehearsal or not host.get("gpu") else f"{slug(host['gpu'])}-{date:%Y-%m-%d}",
    }
    return summary


def verdict(
    steps: list[dict[str, Any]], notebooks: list[dict[str, Any]], *, rehearsal: bool = False, final: bool = True
) -> str:
    """'passed' when every required step passed, no step failed, no required step ran out of time or was left out,
    and every notebook ran; a rehearsal passes with its CUDA steps skipped, and fails if one says it passed."""
    bad = [
        s["name"]
        for s in steps
        if s["status"] == "failed" or (s["status"] in ("timed-out", "not-run") and s["mode"] == "required")
    ]
    if final:
        bad += [f"{n['notebook']} (not run)" for n in notebooks if n["status"] == "not run"]
    if rehearsal:
        bad += [
            f"{s['name']} (passed in a rehearsal)" for s in steps if s["needs"] == "cuda" and s["status"] == "passed"
        ]
    if not final:
        last = steps[-1]["name"] if steps else "nothing"
        return f"incomplete: the check stopped after {last}" + (f"; failed: {', '.join(bad)}" if bad else "")
    if bad:
        return f"failed: {', '.join(bad)}"
    if rehearsal:
        skipped = sum(s["needs"] == "cuda" and s["status"] == "skipped" for s in steps)
        return f"rehearsal passed: every step ran, its {skipped} CUDA steps skipped (no GPU here)"
    return "passed"


def passed(summary: dict[str, Any]) -> bool:
    """Whether the summary's verdict is a pass (a GPU run's, or a rehearsal's)."""
    return summary["verdict"] == "passed" or summary["verdict"].startswith("rehearsal passed")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if v is None else str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _number(value: Any, digits: int = 0) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.{digits}f}"


def _alone(rung: dict[str, Any]) -> Any:
    """A rung's loader-alone rate (named samples_per_s in bench JSON written before it was loader_samples_per_s)."""
    return rung.get("loader_samples_per_s", rung.get("samples_per_s"))


def load_line(summary: dict[str, Any]) -> str:
    """What the load meter saw during each benchmark: other processes' CPU, and whether that made it busy."""
    parts = [
        f"{name}: other processes used up to {load['other_cores_max']:.1f} of {load['cores']} cores"
        + (" (busy: its numbers include that load)" if load["busy"] else "")
        for name, load in (summary.get("load") or {}).items()
        if load
    ]
    return "; ".join(parts) or "not recorded"


def bench_table(payload: dict[str, Any]) -> str:
    """A loader ladder's rungs as a markdown table, peak GPU memory included."""
    rows = [
        [
            r["name"],
            _number(_alone(r)),
            _number(r.get("loader_vs_first", r.get("speedup_vs_first")), 1),
            _number(r["fed_samples_per_s"]),
            _number(r["pipeline_efficiency"], 2),
            _number(r["data_wait_ms"], 1),
            _number(r["compute_ms"], 1),
            _number(r.get("peak_device_mib")),
            _number(r.get("peak_rss_mib")),
        ]
        for r in payload["rungs"]
    ]
    header = [
        "rung",
        "loader samples/s",
        "× first",
        "fed samples/s",
        "efficiency",
        "data-wait ms",
        "compute ms",
        "peak GPU MiB",
        "peak RSS MiB",
    ]
    return _table(header, rows)


def speedups_table(payload: dict[str, Any]) -> str:
    """The speed-up rows (tools/gpu_speedups.py) as a markdown table; a row left out says why."""
    rows = []
    for row in payload["rows"]:
        if "skipped" in row:
            rows.append([row["name"], f"not measured: {row['skipped']}", "", "", ""])
            continue
        low, high = row["step_ms_range"]
        pays = "the baseline" if row is payload["rows"][0] else row.get("pays_off_after") or "not faster here"
        rows.append(
            [
                row["name"],
                f"{_number(row['step_ms'], 2)} ({_number(low, 2)}–{_number(high, 2)})",
                _number(row["startup_s"], 1),
                pays,
                "; ".join(row.get("notes") or []) or "nothing",
            ]
        )
    return _table(["speed-up", "step ms, median (range)", "start-up s", "pays off after (steps)", "applied"], rows)


def markdown(summary: dict[str, Any]) -> str:
    """The summary as a markdown page: what ran where, then every table."""
    host = summary["machine"]
    gpu = f"{host['gpu']} ({host['gpu_memory_gib']} GiB, capability {host['cuda_capability']}, driver {host['driver']})"
    title = "GPU check, rehearsal without CUDA" if summary["dry_run"] else f"GPU check on {host['gpu']}"
    dirty = {True: " (with uncommitted changes)", False: "", None: ""}[summary["dirty"]]
    lines = [
        f"# {title}, {summary['date'][:10]}",
        "",
        f"- **Where**: {gpu if host['gpu'] else 'no CUDA device (CPU only)'}; {host['cpu_cores']} CPU cores, "
        f"{host['memory_gib']} GiB RAM; {host['platform']}, Python {host['python']}",
        f"- **Software**: torch {host['torch']} (CUDA {host['cuda']}, cuDNN {host['cudnn']}), torchvision "
        f"{host['torchvision']}, kornia {host['kornia']}, nbval {host['nbval']}",
        f"- **Commit**: {summary['commit'] or 'unknown'}{dirty}; date {summary['date']}",
        f"- **Data**: {summary['data']}",
        f"- **Wall time**: {_number(summary['wall_seconds'])} s; **verdict**: {summary['verdict']}",
        f"- **Profile**: {summary.get('profile')}; **device**: {summary.get('device')}; **load**: {load_line(summary)}",
        f"- **torch.compile**: {summary.get('compiler') or 'not checked'}",
    ]
    if summary["dry_run"]:
        lines.append(
            "- **Rehearsal**: CUDA was hidden, so every CUDA step ran on the CPU in the smoke profile and is "
            "reported as skipped: **no number below is a GPU measurement**."
        )
    if not summary.get("final", True):
        lines.append("- **Incomplete**: written between steps; the check did not reach its end.")
    lines += [
        "",
        "## Steps",
        "",
        _table(
            ["step", "status", "seconds", "limit s", "mode", "checks", "what"],
            [
                [s["name"], s["status"], s["seconds"], s["limit_seconds"], s["mode"], s["needs"], s["note"]]
                for s in summary["steps"]
            ],
        ),
    ]
    if summary["tests"]:
        rows = [[name, t["passed"], t["failed"], t["errors"], t["skipped"]] for name, t in summary["tests"].items()]
        lines += ["", "## Tests", "", _table(["run", "passed", "failed", "errors", "skipped"], rows), ""]
        for name, t in summary["tests"].items():
            lines += [f"- {name}: FAILED {failure}" for failure in t["failures"][:20]]
            lines += [f"- {name}: {count} skipped: {reason}" for reason, count in t["skip_reasons"].items()]
        lines.append("")
    if summary["notebooks"]:
        rows = [
            [n["notebook"], n["status"], _number(n["cells"]), _number(n["failed_cells"]), _number(n["seconds"])]
            for n in summary["notebooks"]
        ]
        lines += [
            "",
            "## Notebooks (nbval, smoke profile, each in its own process)",
            "",
            _table(["notebook", "status", "cells", "failed cells", "seconds"], rows),
        ]
    if summary.get("failures"):
        lines += ["", "## Failures, with their tracebacks", ""]
        for failure in summary["failures"]:
            lines += [f"### {failure['step']}: {failure['where']}", "", "```", failure["traceback"], "```", ""]
    for name, payload in summary["benches"].items():
        label = payload.get("label", name)
        smoke = " (smoke run: not a measurement)" if payload.get("profile") == "smoke" else ""
        lines += [
            "",
            f"## Benchmark `{name}`, profile {payload.get('profile')}{smoke}",
            "",
            label,
            "",
            f"Data: {payload.get('data', '?')}",
            "",
            bench_table(payload),
        ]
    if summary.get("speedups"):
        lines += [
            "",
            "## Step-side speed-ups",
            "",
            summary["speedups"]["label"],
            "",
            speedups_table(summary["speedups"]),
        ]
    training = summary["training"]
    lines += ["", "## CIFAR-10 training run (ResNet18), time-boxed", ""]
    lines += [f"    {line}" for line in training["log"]] + [""]
    if training["history"]:
        keys = [
            k
            for k in ("epoch", "train_loss", "top1", "trained_seconds", "optimizer_steps", "skipped_steps")
            if k in training["history"][0]
        ]
        rows = [[_number(r.get(k), 1 if k == "trained_seconds" else 4) for k in keys] for r in training["history"]]
        lines += [f"{training['epochs_finished']} epoch(s) finished.", "", _table(keys, rows)]
    else:
        lines.append("No epoch finished.")
    return "\n".join(lines) + "\n"


def write(work: Path, out: Path, *, rehearsal: bool, wall_seconds: int | None, final: bool = True) -> dict[str, Any]:
    """Write OUT/summary.json and OUT/summary.md from OUT and WORK; return the summary. The machine is read once
    (OUT/machine.json): the summary is rewritten after every step."""
    cached = out / "machine.json"
    host = json.loads(cached.read_text()) if cached.is_file() else machine()
    out.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(host, indent=2) + "\n")
    summary = collect(out, work=work, rehearsal=rehearsal, wall_seconds=wall_seconds, host=host, final=final)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(markdown(summary))
    return summary


def publish(out: Path, results: Path) -> list[Path]:
    """Copy a GPU check's summary into results/ under its GPU-and-date name; refuse a dry run's."""
    summary = json.loads((out / "summary.json").read_text())
    if summary["dry_run"] or not summary.get("publish_as"):
        raise ValueError(f"{out / 'summary.json'} is from a rehearsal without a GPU: it holds no GPU number to publish")
    if not summary.get("final", True):
        raise ValueError(f"{out / 'summary.json'} is incomplete (the check stopped before its end): rerun the check")
    results.mkdir(parents=True, exist_ok=True)
    copied = []
    for suffix in (".json", ".md"):
        target = results / f"{summary['publish_as']}{suffix}"
        shutil.copyfile(out / f"summary{suffix}", target)
        copied.append(target)
    return copied


def readme_table(path: Path) -> str:
    """The README's GPU results table, every number taken from one published summary, which it names."""
    summary = json.loads(path.read_text())
    host = summary["machine"]
    rows = []
    for name, payload in summary["benches"].items():
        for rung in payload["rungs"]:
            rows.append(
                [
                    f"{name} ladder: {rung['name']}",
                    f"{_number(_alone(rung))} samples/s alone, "
                    f"{_number(rung['fed_samples_per_s'])} fed (efficiency {_number(rung['pipeline_efficiency'], 2)}), "
                    f"peak GPU {_number(rung.get('peak_device_mib'))} MiB",
                ]
            )
    history = summary["training"]["history"]
    if history:
        last = history[-1]
        rows.append(
            [
                "ResNet18 on the CIFAR-10 stand-in, full profile, time-boxed to 3 min",
                f"{summary['training']['epochs_finished']} epochs in {_number(last.get('trained_seconds'))} s, "
                f"top-1 {_number(100 * last['top1'], 1) if 'top1' in last else '—'}% on the stand-in",
            ]
        )
    caption = (
        f"From `tools/gpu_check.sh` on {host['gpu']} (driver {host['driver']}, torch {host['torch']}, "
        f"{host['cpu_cores']} CPU cores), commit {str(summary['commit'])[:12]}, {summary['date'][:10]}, offline "
        f"stand-ins, so none of these is a BSD100 or CIFAR-10 result. File: `{path.as_posix()}`."
    )
    return caption + "\n\n" + _table(["what (GPU)", "measured"], rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write OUT/summary.json and OUT/summary.md")
    w.add_argument("--work", type=Path, required=True)
    w.add_argument("--out", type=Path, required=True)
    w.add_argument("--rehearsal", "--dry-run", action="store_true", dest="rehearsal")
    w.add_argument("--wall", type=int, default=None, help="the check's wall time, seconds")
    w.add_argument("--final", action="store_true", help="the check has finished (else: written between steps)")
    p = sub.add_parser("publish", help="copy OUT/summary.* to results/<gpu>-<date>.*")
    p.add_argument("out", type=Path)
    p.add_argument("--results", type=Path, default=REPO / "results")
    r = sub.add_parser("readme-table", help="the README's GPU table from a published summary")
    r.add_argument("summary", type=Path)
    args = parser.parse_args(argv)
    if args.command == "write":
        summary = write(args.work, args.out, rehearsal=args.rehearsal, wall_seconds=args.wall, final=args.final)
        if args.final:
            print(f"gpu_summary: {args.out / 'summary.md'}: {summary['verdict']}")
            if summary["publish_as"]:
                print(f"gpu_summary: to publish: python tools/gpu_summary.py publish {args.out}")
        return 0 if passed(summary) or not args.final else 1
    if args.command == "publish":
        for path in publish(args.out, args.results):
            print(f"gpu_summary: wrote {path}")
        return 0
    print(readme_table(args.summary), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
