"""The pipeline doctor: run your own loader feeding your own training step, measure data-wait against compute in
interleaved blocks, and say what bounds it (only when every block agrees) and what to try next, from what it
measured and from what your pipeline already is.

    from helpers.doctor import diagnose
    print(diagnose(loader, step))            # loader: any iterable of batches; step: a TrainStep or f(batch)

Or from the command line, for a script that defines `make_loader()` and `make_step()`:
`python -m helpers.doctor path/to/script.py`. It trains the model it measures (see `diagnose`).

Copy with: measure.py (with loadmeter.py, memory.py, pipeline_result.py), pipeline_facts.py (what the loader and step
already are, and the advice), env.py.
Needs: psutil, torch.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .measure import PipelineProbe, PipelineResult, count_samples, steps_in_budget
from .pipeline_facts import PipelineFacts, advice_for, describe_batch, describe_pipeline

INPUT_BOUND = "INPUT-BOUND"
COMPETES = "LOADER COMPETES WITH THE STEP"
COMPUTE_BOUND = "COMPUTE-BOUND"
INCONCLUSIVE = "INCONCLUSIVE"
COPY_HOWTO = (
    "To leave yours as it was, measure a copy: `model2, optimizer2 = copy.deepcopy((model, optimizer))` (one "
    "call, so the copied optimizer steps the copied model) and build the step on them, or pass "
    "`copy.deepcopy(train_step)` for a TrainStep."
)


# --- the verdict: one reading per block, a name only when they all agree ---


def classify(efficiency: float, wait_ms: float, compute_ms: float, premade_ms: float | None) -> str:
    """What one measurement reads as: the step waits for data, runs slower beside its loader, or keeps up."""
    slowed = compute_ms - premade_ms if premade_ms else 0.0
    if efficiency < 0.90 and premade_ms and slowed > 0.2 * premade_ms and slowed > wait_ms:
        return COMPETES  # it lost more to running slower (workers on its cores, the GIL) than to waiting
    if efficiency >= 0.95:  # fed as fast as pre-made batches in this block: whatever it waited, it did not cost
        return COMPUTE_BOUND
    if wait_ms / max(wait_ms + compute_ms, 1e-12) > 0.10 or efficiency < 0.90:
        return INPUT_BOUND
    return COMPUTE_BOUND


def verdict_of(readings: list[str]) -> str:
    """The bottleneck every reading names, or INCONCLUSIVE when they differ (or there are none)."""
    return readings[0] if readings and len(set(readings)) == 1 else INCONCLUSIVE


def _span(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def _range_text(span: tuple[float, float, float], digits: int = 1) -> str:
    median, low, high = span
    return f"{median:.{digits}f} ({low:.{digits}f}–{high:.{digits}f})"


def efficiency_text(median: float, low: float, high: float) -> str:
    """An efficiency with its range, never above 1 as a number: fed cannot beat pre-made, so above 1 is noise."""
    if median > 1.0:
        return f"1.0 within the noise (measured {median:.2f}, {low:.2f}–{high:.2f})"
    if high > 1.0:
        return f"{median:.2f} ({low:.2f}–1.0 within the noise; highest block measured {high:.2f})"
    return f"{median:.2f} ({low:.2f}–{high:.2f})"


def _headline(verdict: str, readings: list[str], numbers: str, *, what: str = "measurements") -> str:
    if verdict != INCONCLUSIVE:
        return f"{verdict}: {numbers}."
    counts = ", ".join(f"{readings.count(r)} {r.lower()}" for r in dict.fromkeys(readings))
    return f"{INCONCLUSIVE}: rerun on a quieter machine. The {what} disagree ({counts}): {numbers}."


# --- a result measured elsewhere (the ladders) ---


def diagnose_pipeline(
    result: PipelineResult,
    *,
    num_workers: int | None = None,
    cpu_cores: int | None = None,
    pipeline: PipelineFacts | None = None,
) -> str:
    """The doctor on a PipelineResult: its verdict at both ends of the efficiency range (a name only when both agree,
    else inconclusive) on the first line, then what to try, from `pipeline` (or just its worker count) if given."""
    low, high = result.efficiency_range or (result.pipeline_efficiency,) * 2
    readings = [classify(e, result.data_wait_ms, result.compute_ms, result.premade_step_ms) for e in (low, high)]
    verdict = verdict_of(readings)
    premade = f", {result.premade_step_ms:.1f} ms per step on pre-made batches" if result.premade_step_ms else ""
    numbers = (
        f"efficiency {efficiency_text(result.pipeline_efficiency, low, high)}; "
        f"{100 * result.data_wait_fraction:.0f}% of each step waits for data ({result.data_wait_ms:.1f} ms "
        f"wait, {result.compute_ms:.1f} ms compute{premade})"
    )
    facts = pipeline or PipelineFacts(
        num_workers=num_workers, cpu_cores=cpu_cores or 0, loader="DataLoader" if num_workers is not None else ""
    )
    advice = advice_for(verdict, facts)
    headline = _headline(verdict, readings, numbers, what="two ends of the efficiency range")
    return "\n".join([headline, *(["Try, in order:", *advice] if advice else [])])


# --- your loader and your step ---


def _required_positionals(step: Callable[..., Any]) -> int:
    try:
        parameters = inspect.signature(step).parameters.values()
    except (TypeError, ValueError):  # a builtin or C extension: assume it takes the batch
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in kinds and p.default is inspect.Parameter.empty for p in parameters)


class BatchStep:
    """A step made to take one batch: one that needs two or more positional arguments (a TrainStep's `(inputs,
    targets)`) is called as `step(*batch)`, one that needs one as `step(batch)`. Counts the steps it ran."""

    def __init__(self, step: Callable[..., Any]) -> None:
        self.step, self.arguments, self.calls = step, _required_positionals(step), 0

    def __call__(self, batch: Any) -> Any:
        """Run the wrapped step on one batch."""
        self.calls += 1
        if self.arguments < 2:
            return self.step(batch)
        if not isinstance(batch, (tuple, list)) or len(batch) < self.arguments:
            raise TypeError(
                f"the step takes {self.arguments} arguments, but a batch is a {type(batch).__name__}"
                f"{f' of {len(batch)}' if isinstance(batch, (tuple, list)) else ''}: pass "
                "`lambda batch: step(...)` that unpacks your batch"
            )
        return self.step(*batch)


class _Watched:
    """The loader as it is, remembering what its first batch looked like before anything moved it."""

    first_batch: dict[str, Any] | None

    def __init__(self, loader: Iterable) -> None:
        self.loader, self.first_batch = loader, None

    def __iter__(self) -> Iterator[Any]:
        for batch in self.loader:
            if self.first_batch is None:
                self.first_batch = describe_batch(batch)
            yield batch


def _modules_of(step: Callable[..., Any]) -> list[torch.nn.Module]:
    owners = [step, getattr(step, "__self__", None)]
    found = [m for o in owners for m in (getattr(o, "model", None),) if isinstance(m, torch.nn.Module)]
    try:  # a plain function: the modules it reads (the `model` of your training loop)
        names = inspect.getclosurevars(step)
        found += [v for v in (*names.nonlocals.values(), *names.globals.values()) if isinstance(v, torch.nn.Module)]
    except TypeError:
        pass
    return found


def step_device(step: Callable[..., Any], device: torch.device | str | None = None) -> torch.device:
    """Where the batches go: `device` if given, else the step's own (TrainStep.device, or the device of a model the
    step function uses), else CUDA when available, else the CPU."""
    if device is not None:
        return torch.device(device)
    own = getattr(step, "device", None)
    if isinstance(own, (torch.device, str)):
        return torch.device(own)
    for module in _modules_of(step):
        parameter = next(module.parameters(), None)
        if parameter is not None:
            return parameter.device
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@dataclass
class Diagnosis:
    """What the doctor measured on one loader feeding one step, what it concludes, and what to try."""

    verdict: str  # INPUT-BOUND, LOADER COMPETES WITH THE STEP, COMPUTE-BOUND or INCONCLUSIVE
    readings: list[str]  # the verdict each block pair read on its own
    data_wait_ms: tuple[float, float, float]  # median per fed step, then the lowest and highest block's median
    compute_ms: tuple[float, float, float]  # the same for the step itself
    efficiency: tuple[float, float, float]  # fed / pre-made samples/s: median over block pairs, lowest, highest
    premade_step_ms: tuple[float, float, float]  # the step on pre-made device batches: undisturbed
    fed_samples_per_s: tuple[float, float, float]  # the loader feeding the step, end to end: median, lowest, highest
    result: PipelineResult
    pipeline: PipelineFacts
    load: str  # what the rest of the machine did during the timed blocks, or why that is unknown
    trained_steps: int  # steps of the reader's step that ran: the model it measured has trained this much
    seconds: float
    budget_s: float
    advice: list[str] = field(default_factory=list)

    @property
    def headline(self) -> str:
        """The first line: the verdict and the numbers it rests on, each with its range over blocks."""
        wait, compute = self.data_wait_ms[0], self.compute_ms[0]
        numbers = (
            f"efficiency {efficiency_text(*self.efficiency)} over {len(self.readings)} block pairs; "
            f"{100 * wait / max(wait + compute, 1e-12):.0f}% of each fed step waits for data: data-wait "
            f"{_range_text(self.data_wait_ms)} ms, compute {_range_text(self.compute_ms)} ms, against "
            f"{_range_text(self.premade_step_ms)} ms per step on pre-made batches"
        )
        return _headline(self.verdict, self.readings, numbers, what="block pairs")

    def __str__(self) -> str:
        return "\n".join(
            [
                self.headline,
                f"Pipeline: {self.pipeline.summary()}.",
                f"Machine: {self.load}.",
                f"It trained the model it measured: {self.trained_steps} steps of your step ran (weights and optimizer "
                f"state changed). {COPY_HOWTO}",
                "Try, in order:" if self.advice else "Nothing to try on this reading.",
                *self.advice,
                f"Measured in {self.seconds:.1f} s (budget {self.budget_s:g} s of timed blocks, plus warm-up).",
            ]
        )


def per_step(recorded: list[Any]) -> list[float]:
    """A probe's per-step seconds (waits or computes) as one flat list, whether it keeps them flat or per block."""
    return [value for entry in recorded for value in (entry if isinstance(entry, list) else [entry])]


def _block_numbers(probe: PipelineProbe, blocks: int, steps: int) -> dict[str, list[float]]:
    """Run `blocks` fed / pre-made pairs on a warmed-up probe; per pair: efficiency, median wait and compute per fed
    step, pre-made time per step, and the fed samples/s (all from the probe's public blocks)."""
    numbers: dict[str, list[float]] = {"efficiency": [], "wait": [], "compute": [], "premade": [], "fed": []}
    samples = count_samples(probe.batches[0])
    for _ in range(blocks):
        first = len(per_step(probe.waits))
        fed, premade = probe.fed_block(steps), probe.premade_block(steps)
        numbers["efficiency"].append(fed / premade)
        numbers["wait"].append(1000 * statistics.median(per_step(probe.waits)[first:]))
        numbers["compute"].append(1000 * statistics.median(per_step(probe.computes)[first:]))
        numbers["premade"].append(1000 * samples / premade)
        numbers["fed"].append(fed)
    return numbers


def diagnose(
    loader: Iterable,
    step: Callable[..., Any],
    *,
    budget_s: float = 10.0,
    device: torch.device | str | None = None,
    blocks: int = 3,
    cpu_cores: int | None = None,
) -> Diagnosis:
    """Measure `loader` feeding `step` and say what bounds it and what to try; print the result to read it.

    `loader` is any iterable of batches (a DataLoader, a generator-returning object, the course's loaders); it is
    restarted when an epoch ends. `step` is a TrainStep (called `step(inputs, targets)`: any callable needing two or
    more positional arguments gets the batch unpacked) or any callable taking the batch. `device` is where batches
    are moved before the step (default: the step's own device, see `step_device`). `budget_s` (default 10) is the
    time of the `blocks` interleaved fed / pre-made block pairs; warm-up and one calibration pair come on top.
    The bottleneck is named only when every block pair reads the same, otherwise the verdict is inconclusive.

    It TRAINS the model it measures (every step is a real optimizer step); to keep yours, measure a copy: build the
    step on `copy.deepcopy((model, optimizer))`, or pass `copy.deepcopy(train_step)`.
    """
    started = time.perf_counter()
    runner, target, watched = BatchStep(step), step_device(step, device), _Watched(loader)
    probe = PipelineProbe(watched, runner, target, premade=2)
    steps = steps_in_budget(budget_s / blocks, probe.seconds_per_pair())
    probe.forget()  # the load during the timed blocks, not during start-up and calibration
    numbers = _block_numbers(probe, blocks, steps)
    columns = (numbers[key] for key in ("efficiency", "wait", "compute", "premade"))
    readings = [classify(*values) for values in zip(*columns)]
    facts = describe_pipeline(loader, step, target, watched.first_batch, cpu_cores=cpu_cores)
    result = probe.result()
    meter = result.load  # the probe's load meter read the timed blocks themselves
    other_cores = meter.other_cores if meter is not None else None
    diagnosis = Diagnosis(
        verdict_of(readings),
        readings,
        _span(numbers["wait"]),
        _span(numbers["compute"]),
        _span(numbers["efficiency"]),
        _span(numbers["premade"]),
        _span(numbers["fed"]),
        result,
        facts,
        meter.note() if meter is not None else "other processes' CPU use was not measured",
        runner.calls,
        time.perf_counter() - started,
        budget_s,
    )
    diagnosis.advice = advice_for(diagnosis.verdict, facts, other_cores=other_cores)
    return diagnosis


# --- the command line ---


def load_script(path: str | Path) -> Any:
    """Import a Python file as a module (its folder first on sys.path), with an error that names it if it fails."""
    script = Path(path)
    if not script.is_file():
        raise FileNotFoundError(
            f"{script}: no such script; give the path of a .py file defining make_loader() and make_step()"
        )
    sys.path.insert(0, str(script.resolve().parent))
    spec = importlib.util.spec_from_file_location(script.stem, script)
    if spec is None or spec.loader is None:
        raise ImportError(f"{script}: cannot be imported as Python; give a .py file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, what in (
        ("make_loader", "your loader (any iterable of batches)"),
        ("make_step", "your training step (a TrainStep, or any callable taking a batch)"),
    ):
        if not callable(getattr(module, name, None)):
            raise AttributeError(f"{script}: defines no {name}(); add `def {name}():` that returns {what}")
    return module


def main(argv: list[str] | None = None) -> int:
    """`python -m helpers.doctor script.py [--budget-s S] [--device D]`: diagnose the script's loader and step."""
    parser = argparse.ArgumentParser(prog="python -m helpers.doctor", description=main.__doc__)
    parser.add_argument("script", help="a .py file defining make_loader() and make_step()")
    parser.add_argument("--budget-s", type=float, default=10.0, help="seconds of timed blocks (default 10)")
    parser.add_argument("--device", default=None, help="where batches go (default: the step's own device)")
    parser.add_argument("--blocks", type=int, default=3, help="interleaved fed / pre-made block pairs (default 3)")
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
    except (OSError, ImportError, AttributeError) as error:
        print(f"helpers.doctor: {error}", file=sys.stderr)
        return 2
    print(
        diagnose(
            script.make_loader(), script.make_step(), budget_s=args.budget_s, device=args.device, blocks=args.blocks
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
