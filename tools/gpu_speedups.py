"""The GPU check's step-side speed-ups: lesson 03's table (`helpers.speedups.measure_speedups` on its small CNN, at
the profile's batch and rounds) as JSON for tools/gpu_summary.py, with the torch.compile rows left out, and why, where
tools/gpu_check.sh found no host C compiler (Triton builds its kernel launchers with one).

    python tools/gpu_speedups.py --profile full --json OUT/speedups.json [--skip-compile REASON]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere: the course is the checkout this file is in
    sys.path.insert(0, str(REPO))

from helpers.course.profiles import resolve_profile  # noqa: E402 (after the path above)
from helpers.course.results import provenance  # noqa: E402
from helpers.env import resolve_device  # noqa: E402
from helpers.loadmeter import LoadMeter  # noqa: E402
from helpers.models import SmallConvNet  # noqa: E402
from helpers.speedups import compiler_status, measure_speedups  # noqa: E402
from helpers.step import native_precisions  # noqa: E402


def precision_for(device: torch.device) -> str:
    """The precision the rows are timed in: bf16 where the device runs it natively, else fp16 on CUDA, else fp32 (the
    lesson measures which is fastest; the check times the one a course run would most likely choose)."""
    native = native_precisions(device)
    if "bf16" in native:
        return "bf16"
    return "fp16" if device.type == "cuda" and "fp16" in native else "fp32"


def run(profile_name: str, skip_compile: str | None) -> dict[str, Any]:
    """Measure the speed-up rows on this machine's device; return them with what they ran on."""
    profile = resolve_profile(profile_name)
    device = resolve_device()
    precision = precision_for(device)
    torch.manual_seed(0)
    images = torch.randn(profile.conv_batch, 3, 32, 32, device=device)
    labels = torch.randint(0, 10, (profile.conv_batch,), device=device)
    reason = skip_compile or profile.compile_skip
    with LoadMeter() as meter:
        rows = measure_speedups(
            lambda: SmallConvNet(width=32),
            (images, labels),
            nn.CrossEntropyLoss(),
            device=device,
            precision=precision,
            rounds=profile.speedup_rounds,
            per_round=profile.speedup_per_round,
            skip_compile=reason,
        )
    reading = meter.total()
    load = reading.as_dict() if reading is not None else None
    return {
        **provenance(profile=profile.name, device=device, rows=[{"load": load}]),
        "label": profile.label(f"step-side speed-ups, small CNN, batch {profile.conv_batch}, 32 px, {precision}"),
        "compiler": "left out: " + reason if reason else compiler_status(device.type)[1],
        "precision": precision,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="auto", help="auto, smoke, cpu or full (COURSE_PROFILE overrides)")
    parser.add_argument("--json", type=Path, required=True, help="where the rows go")
    parser.add_argument("--skip-compile", default=None, help="leave the torch.compile rows out, for this reason")
    args = parser.parse_args(argv)
    payload = run(args.profile, args.skip_compile)
    for row in payload["rows"]:
        if "skipped" in row:
            print(f"{row['name']}: not measured: {row['skipped']}")
        else:
            low, high = row["step_ms_range"]
            print(f"{row['name']}: {row['step_ms']:.2f} ms ({low:.2f}-{high:.2f}), start-up {row['startup_s']:.1f} s")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
