"""The pipeline doctor: what bounds your training (the step waits for data, its loader competes with it for the
cores, the copy to the GPU, or the step itself), how sure that is, what to try next and which lesson teaches it,
measured two ways, and each report says which:

- your own loop, unchanged: `python -m helpers.doctor train.py -- <its arguments>` (from the course's checkout;
  installed by `pip install`, `python -m feeding_the_gpu.doctor`) runs the script under instrumentation for a
  bounded number of steps (data-wait inside its DataLoader's `__next__` against the time between batches, optimizer
  steps seen through PyTorch's global step hooks, the same loop on replayed batches as the pre-made reference), stops
  it and diagnoses; in code, `with watch() as doctor: <your loop>` (doctor_watch.py);
- a controlled comparison: `diagnose(loader, step)` times interleaved blocks of your loader feeding your step
  against the same step on pre-made batches (a script defining `make_loader()` and `make_step()` gets this from the
  command line).

Both train the model they measure (see `diagnose`). The loader is any iterable of batches; the step a TrainStep, any
f(inputs, targets) or f(batch).

Example:
    >>> data = torch.utils.data.TensorDataset(torch.randn(64, 3), torch.randint(0, 2, (64,)))
    >>> model = torch.nn.Linear(3, 2)
    >>> def step(inputs, targets): torch.nn.functional.cross_entropy(model(inputs), targets).backward()
    >>> diagnosis = diagnose(torch.utils.data.DataLoader(data, batch_size=8), step, steps=4, blocks=2, notify=None)
    >>> diagnosis.method, diagnosis.trained_steps  # print(diagnosis): the verdict, how sure, what to try
    ('a controlled comparison, diagnose(loader, step)', 22)

Copy with: diagnosis.py (the report) with bottleneck.py, doctor_advice.py, pipeline_facts.py, env.py, loadmeter.py,
measure.py, memory.py, pipeline_result.py, spread.py and safe_open.py; doctor_watch.py (your own loop, watched).
Needs: psutil, torch.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from .bottleneck import (  # noqa: F401 (the labels are read from here too)
    COMPETES,
    COMPUTE_BOUND,
    INCONCLUSIVE,
    INPUT_BOUND,
    LABELS,
    TRANSFER_BOUND,
    Shares,
    classify,
    most_likely,
    ms_efficiency_note,
    shares_text,
)
from .diagnosis import Diagnosis, Notify, build_diagnosis, copy_ms, notify_stderr, plan_blocks
from .doctor_advice import advice_for
from .doctor_watch import DoctorStop, Watch, run_script, watch  # noqa: F401 (the doctor's second way, re-exported)
from .env import usable_cpu_count
from .measure import PipelineProbe, PipelineResult, count_samples
from .pipeline_facts import PipelineFacts, describe_batch, describe_pipeline
from .safe_open import read_regular_bytes
from .spread import efficiency_text

# --- a result measured elsewhere (the ladders) ---


def diagnose_pipeline(
    result: PipelineResult,
    *,
    num_workers: int | None = None,
    cpu_cores: int | None = None,
    threads: int | None = None,
    pipeline: PipelineFacts | None = None,
) -> str:
    """The doctor on a PipelineResult: the verdict of its medians as printed, with how sure (the two ends of the
    efficiency range read alike or not; the load during it), on the first line, then what to try, from `pipeline`
    (or just its worker count, `threads` and `cpu_cores`) if given."""
    efficiency = result.efficiency
    wait, compute, premade = result.data_wait_ms, result.compute_ms, result.premade_step_ms
    readings = [classify(Shares.of(wait, compute, premade, efficiency=e)) for e in efficiency.range]
    # the label reads the ms it prints: their efficiency, pre-made / (wait + compute), where a pre-made step was timed
    shares = Shares.of(wait, compute, premade) if premade else Shares.of(wait, compute, efficiency=efficiency.median)
    load = result.load
    finding = most_likely(
        shares, readings, what="ends of the efficiency range", busy_note=load.note() if load and load.busy else ""
    )
    against = f" against {premade:.1f} ms on pre-made batches" if premade else ""
    headline = (
        f"{finding.label} ({finding.confidence}): efficiency {efficiency_text(efficiency)}"
        f"{ms_efficiency_note(efficiency, shares)}; "
        f"{shares_text(shares)} ({wait:.1f} ms wait, {compute:.1f} ms compute{against})."
    )
    facts = pipeline or PipelineFacts(
        loader="DataLoader" if num_workers is not None else "",
        num_workers=num_workers,
        cpu_cores=cpu_cores or usable_cpu_count(),
        intra_op_threads=threads or torch.get_num_threads(),
    )
    advice = advice_for(finding.label, facts, other_cores=load.other_cores if load else None)
    return "\n".join([headline, f"How sure: {finding.how_sure()}.", *(["Try, in order:", *advice] if advice else [])])


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


def per_step(recorded: list[Any]) -> list[float]:
    """A probe's per-step seconds (waits or computes) as one flat list, whether it keeps them flat or per block."""
    return [value for entry in recorded for value in (entry if isinstance(entry, list) else [entry])]


def _block_numbers(probe: PipelineProbe, blocks: int, steps: int) -> dict[str, list[float]]:
    """Run `blocks` fed / pre-made pairs on a warmed-up probe, the loader's workers stopped during each pre-made
    block (so it has the cores to itself) and restarted untimed before the next fed one; per pair: efficiency,
    mean wait and compute per fed step (their sum is the fed step), pre-made time per step, and the fed samples/s."""
    numbers: dict[str, list[float]] = {"efficiency": [], "wait": [], "compute": [], "premade": [], "fed": []}
    samples = count_samples(probe.batches[0])
    for _ in range(blocks):
        first = len(per_step(probe.waits))
        fed, premade = probe.block_pair(steps)
        numbers["efficiency"].append(fed / premade)
        numbers["wait"].append(1000 * statistics.fmean(per_step(probe.waits)[first:]))  # means: they add up
        numbers["compute"].append(1000 * statistics.fmean(per_step(probe.computes)[first:]))
        numbers["premade"].append(1000 * samples / premade)
        numbers["fed"].append(fed)
    return numbers


def expected_seconds(budget_s: float, seconds_per_pair: float, *, blocks: int = 3, steps: int | None = None) -> float:
    """About how long `diagnose` takes on a step pair (fed + pre-made) of `seconds_per_pair`: its blocks as planned
    for `budget_s` (at least the minimum steps, past the budget if need be) and the three untimed pairs before them
    (two of warm-up, one of calibration)."""
    plan = plan_blocks(budget_s, seconds_per_pair, blocks=blocks, steps=steps)
    return plan.seconds + 3 * seconds_per_pair


def diagnose(
    loader: Iterable,
    step: Callable[..., Any],
    *,
    budget_s: float = 10.0,
    device: torch.device | str | None = None,
    blocks: int = 3,
    steps: int | None = None,
    cpu_cores: int | None = None,
    notify: Notify | None = notify_stderr,
) -> Diagnosis:
    """Measure `loader` feeding `step` against the same step on pre-made batches, and say what bounds it, how sure,
    and what to try; print the result to read it.

    `loader` is any iterable of batches (a DataLoader, a generator-returning object, the course's loaders); it is
    restarted when an epoch ends, and its workers are stopped during the pre-made blocks. `step` is a TrainStep
    (called `step(inputs, targets)`: any callable needing two or more positional arguments gets the batch unpacked)
    or any callable taking the batch. `device` is where batches are moved before the step (default: the step's own
    device, see `step_device`). `budget_s` (default 10) buys steps: after a warm-up and one timed calibration pair,
    the `blocks` interleaved fed / pre-made block pairs get as many steps each as fit (`steps` fixes them), at least
    MINIMUM_STEPS; when that minimum already exceeds the budget, `notify` says so before the blocks start.

    It TRAINS the model it measures (every step is a real optimizer step); to keep yours, measure a copy: build the
    step on `copy.deepcopy((model, optimizer))`, or pass `copy.deepcopy(train_step)`.
    """
    started = time.perf_counter()
    runner, target = BatchStep(step), step_device(step, device)
    probe = PipelineProbe(loader, runner, target, premade=2)
    plan = plan_blocks(budget_s, probe.seconds_per_pair(), blocks=blocks, steps=steps)
    if plan.over_budget and notify is not None:
        notify(plan.note())
    probe.forget()  # the load during the timed blocks, not during start-up and calibration
    numbers = _block_numbers(probe, blocks, plan.steps)
    facts = describe_pipeline(loader, step, target, describe_batch(probe.host_batch), cpu_cores=cpu_cores)
    copy = copy_ms(probe.host_batch, target)
    result = probe.result()
    measured = (
        f"your loader feeding your step in {blocks} interleaved block pairs of {plan.steps} steps, against the same "
        f"step on {len(probe.batches)} batches already on {target} (the loader's workers stopped meanwhile); a fed "
        "step's data-wait is getting the next batch from the loader onto the device, its compute the step, the "
        "device synchronised between them."
    )
    return build_diagnosis(
        numbers,
        facts,
        result.load,  # the probe's load meter read the timed blocks themselves
        copy=copy,
        copy_in_wait=True,
        trained_steps=runner.calls,
        seconds=time.perf_counter() - started,
        budget_s=budget_s,
        method="a controlled comparison, diagnose(loader, step)",
        measured=measured,
        plan=plan.note(),
        result=result,
    )


# --- the command line ---


def defines_loader_and_step(path: str | Path) -> bool:
    """True when a script defines make_loader() and make_step() at its top level (read, not run)."""
    source = read_regular_bytes(path, role="the training script").decode("utf-8")  # a FIFO is named, not waited on
    tree = ast.parse(source, filename=str(path))
    names = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return {"make_loader", "make_step"} <= names


def load_script(path: str | Path) -> Any:
    """Import a Python file as a module (its folder first on sys.path), with an error that names it if it fails."""
    script = Path(path)
    if not script.is_file():
        raise FileNotFoundError(f"{script}: no such script; give the path of your training script (a .py file)")
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


def _arguments(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The doctor's own options, and the script's arguments after `--`."""
    mine, theirs = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(prog=f"python -m {__package__ or 'helpers'}.doctor", description=main.__doc__)
    parser.add_argument("script", help="your training script, run as it is (or one defining make_loader/make_step)")
    parser.add_argument("--budget-s", type=float, default=10.0, help="seconds of timed blocks (default 10)")
    parser.add_argument("--blocks", type=int, default=3, help="interleaved fed / pre-made block pairs (default 3)")
    parser.add_argument("--steps", type=int, default=None, help="steps per block (default: what the budget buys)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps of a watched script first (default 3)")
    parser.add_argument("--device", default=None, help="where batches go (controlled comparison; default: the step's)")
    return parser.parse_args(mine), theirs


def main(argv: list[str] | None = None) -> int:
    """`python -m helpers.doctor train.py [--budget-s S] [--blocks B] [--steps N] -- <the script's own arguments>`: run
    your training script unchanged for a bounded number of steps, stop it, and diagnose its loop (a script defining
    make_loader() and make_step() gets the controlled comparison of diagnose() instead)."""
    args, script_args = _arguments(sys.argv[1:] if argv is None else argv)
    script = Path(args.script)
    try:
        controlled = defines_loader_and_step(script)
    except (OSError, SyntaxError, UnicodeDecodeError) as error:
        print(f"helpers.doctor: {script}: cannot be read as a Python script ({error})", file=sys.stderr)
        return 2
    if not controlled:
        options = dict(budget_s=args.budget_s, blocks=args.blocks, steps=args.steps, warmup=args.warmup)
        return run_script(script, script_args, **options)
    try:
        module = load_script(script)
    except (OSError, ImportError, AttributeError) as error:
        print(f"helpers.doctor: {error}", file=sys.stderr)
        return 2
    options = dict(budget_s=args.budget_s, device=args.device, blocks=args.blocks, steps=args.steps)
    print(diagnose(module.make_loader(), module.make_step(), **options))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
