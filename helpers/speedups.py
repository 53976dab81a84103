"""Step-side speed-ups as options, each checked against what this machine supports: torch.compile of the model
("default", or "reduce-overhead" for CUDA graphs on CUDA), fused optimizers (`fused=True` where the device has the
kernels, `foreach` otherwise), cudnn.benchmark on CUDA, channels_last with AMP; and a side-by-side measurement of
them, interleaved with ranges, that says what each costs (compile time) and after how many steps it pays off.

The fast choice is the default where it is safe: fused/foreach optimizers, cudnn.benchmark (CUDA, fixed shapes)
and channels_last with AMP on CUDA. torch.compile is opt-in: it costs compile time at start-up (and again for
every new input shape) and needs a toolchain (a C++ compiler on a CPU; Triton and a host C compiler on CUDA).

Example:
    >>> model = torch.nn.Linear(4, 1)
    >>> optimizer, how = fast_optimizer("adamw", model.parameters(), device="cpu", lr=1e-3)
    >>> type(optimizer).__name__, how
    ('AdamW', 'adamw fused on cpu')
    >>> list(speedup_variants("cpu"))[:3]  # the rows measure_speedups times, interleaved; then torch.compile's
    ['plain step (foreach off)', 'fused/foreach optimizer', 'channels_last']

Copy with: step.py and precision.py (the step it speeds up and the interleaved timing) with spread.py.
Needs: torch.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import shutil
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch._inductor.config as inductor_config
from torch import nn

from .precision import interleaved_times
from .spread import Spread
from .step import TrainStep


def _builds(compiler: str, language: str, source: str, *flags: str) -> str | None:
    """None when `compiler` builds `source` into a program, else why not (its message, cut short)."""
    with tempfile.TemporaryDirectory() as folder:
        try:
            done = subprocess.run(
                [compiler, "-x", language, "-", *flags, "-o", str(Path(folder) / "a.out")],
                text=True,
                input=source,
                capture_output=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"does not run ({error})"
    return f"cannot build a test program: {done.stderr.strip()[:200]}" if done.returncode else None


@functools.lru_cache(maxsize=4)
def compiler_status(device_type: str) -> tuple[bool, str]:
    """Whether torch.compile can run on this device type here, and why not when it cannot: a CPU needs a working C++
    compiler, CUDA needs Triton and a host C compiler that builds against Python.h (Triton's kernel launchers)."""
    if not hasattr(torch, "compile"):
        return False, f"torch {torch.__version__} has no torch.compile"
    if device_type == "cuda":
        if importlib.util.find_spec("triton") is None:
            return False, "Triton is not installed (torch.compile on CUDA needs it)"
        # Triton looks for $CC, then gcc, then clang, and compiles each kernel's launcher against Python.h
        compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
        if compiler is None:
            return False, "no host C compiler ($CC, gcc or clang): Triton needs one to build its kernel launchers"
        include = sysconfig.get_paths()["include"]
        why = _builds(compiler, "c", "#include <Python.h>\nint main(void) { return 0; }\n", f"-I{include}")
        if why is not None:
            return False, f"the C compiler {compiler} {why} (Triton builds against Python.h: install python3-dev)"
        return True, f"Triton is installed and {compiler} builds against Python.h"
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++") or shutil.which("c++")
    if compiler is None:
        return False, "no C++ compiler found (torch.compile on a CPU needs one: install g++ or clang)"
    why = _builds(compiler, "c++", "int main() { return 0; }\n")
    if why is not None:
        return False, f"the C++ compiler {compiler} {why}"
    return True, f"C++ compiler {compiler} works"


def fast_optimizer(
    kind: str, parameters: Any, *, device: torch.device | str, lr: float, **options: Any
) -> tuple[torch.optim.Optimizer, str]:
    """An SGD, Adam or AdamW optimizer with fused kernels where `device` has them, else the foreach (multi-tensor)
    implementation; returns it and which one it is."""
    classes = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
    if kind not in classes:
        raise ValueError(f"kind must be one of {', '.join(classes)}, not {kind!r}")
    parameters = list(parameters)
    try:
        return classes[kind](parameters, lr=lr, fused=True, **options), f"{kind} fused on {torch.device(device).type}"
    except (RuntimeError, ValueError, TypeError) as error:  # no fused kernel for this device or dtype
        optimizer = classes[kind](parameters, lr=lr, foreach=True, **options)
        return optimizer, f"{kind} foreach (fused unavailable: {str(error).splitlines()[0][:80]})"


@dataclass(frozen=True)
class SpeedUps:
    """Which speed-ups a step uses. None means "where it is safe here" (see the module's docstring)."""

    compile: bool = False
    compile_mode: str | None = None  # "reduce-overhead": CUDA graphs on CUDA
    compile_optimizer: bool = False  # also compile optimizer.step: with the model, the whole step is compiled
    fused_optimizer: bool = True
    cudnn_benchmark: bool | None = None  # None: on CUDA
    channels_last: bool | None = None  # None: on CUDA with AMP


def build_fast_step(
    model: nn.Module,
    loss_fn: Callable,
    *,
    device: torch.device | str,
    precision: str = "fp32",
    options: SpeedUps = SpeedUps(),
    optimizer: str = "sgd",
    lr: float = 0.01,
    **optimizer_options: Any,
) -> tuple[TrainStep, list[str]]:
    """A TrainStep for `model` with the speed-ups `options` asks for and this machine supports; returns it and one
    line per speed-up saying what was applied, or why it was skipped."""
    device = torch.device(device)
    notes = []
    benchmark = device.type == "cuda" if options.cudnn_benchmark is None else options.cudnn_benchmark
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = benchmark
        notes.append(f"cudnn.benchmark {'on' if benchmark else 'off'}")
    channels_last = (
        (device.type == "cuda" and precision != "fp32") if options.channels_last is None else options.channels_last
    )
    model = model.to(device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)  # before the optimizer and compile see the parameters
        notes.append("channels_last")
    if options.fused_optimizer:
        opt, note = fast_optimizer(optimizer, model.parameters(), device=device, lr=lr, **optimizer_options)
        notes.append(note)
    else:
        opt = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[optimizer](
            model.parameters(), lr=lr, foreach=False, **optimizer_options
        )
    forward = model
    if options.compile:
        usable, why = compiler_status(device.type)
        if usable and (options.compile_mode != "reduce-overhead" or device.type == "cuda"):
            # torch.compile of an nn.Module returns an OptimizedModule (an nn.Module); its stub says only Callable
            forward = torch.compile(model, mode=options.compile_mode)  # type: ignore[assignment]
            notes.append(f"torch.compile(mode={options.compile_mode!r})")
            if options.compile_optimizer:
                # a compiled stand-in for the method: mypy refuses assigning to a method, and to its overloads
                opt.step = _compiled_step(opt)  # type: ignore[method-assign,assignment]
                notes.append("optimizer.step compiled")
        else:
            notes.append(f"compile skipped: {why if not usable else 'reduce-overhead (CUDA graphs) needs CUDA'}")
    step = TrainStep(forward, opt, loss_fn, device=device, precision=precision, channels_last=channels_last)
    return step, notes


def _compiled_step(optimizer: torch.optim.Optimizer) -> Callable[[], None]:
    """`optimizer.step` compiled as PyTorch's recipe does it, a function that calls it (compiling the bound method
    itself ran hundreds of times slower here). A float learning rate is a constant to the compiler: a schedule that
    changes it recompiles (the recipe's fix: the learning rate as a tensor)."""
    plain = optimizer.step

    @torch.compile(fullgraph=False)
    def step() -> None:
        plain()

    return lambda *args, **kwargs: step()


def speedup_variants(device: torch.device | str) -> dict[str, SpeedUps]:
    """The rows a lesson measures on `device`: the plain step, then one speed-up at a time, then compile modes."""
    device = torch.device(device)
    plain = SpeedUps(fused_optimizer=False, cudnn_benchmark=False, channels_last=False)
    rows = {
        "plain step (foreach off)": plain,
        "fused/foreach optimizer": replace(plain, fused_optimizer=True),
        "channels_last": replace(plain, channels_last=True),
    }
    if device.type == "cuda":  # listed, never timed here: measure_speedups says why
        rows["cudnn.benchmark"] = replace(plain, cudnn_benchmark=True)
    rows["torch.compile"] = replace(plain, compile=True)
    rows["torch.compile, model and optimizer step"] = replace(plain, compile=True, compile_optimizer=True)
    if device.type == "cuda":
        rows["torch.compile reduce-overhead (CUDA graphs)"] = replace(
            plain, compile=True, compile_mode="reduce-overhead"
        )
    return rows


# Why measure_speedups leaves a cudnn.benchmark row unmeasured: in one process it cannot be timed apart from the rows
# before it (PyTorch keeps one cache of cuDNN algorithms per convolution shape, filled by the first row that runs it,
# and benchmark=True only searches on a cache miss), and the flag is global (every build sets it for all the steps).
CUDNN_BENCHMARK_UNMEASURED = (
    "not timed beside the other rows: the plain row has already filled cuDNN's per-shape algorithm cache that "
    "benchmark=True would search, and the flag is process-wide; build_fast_step turns it on for fixed shapes"
)


def measure_speedups(
    build: Callable[[], nn.Module],
    example: tuple[torch.Tensor, torch.Tensor],
    loss_fn: Callable,
    *,
    device: torch.device | str,
    precision: str = "fp32",
    variants: dict[str, SpeedUps] | None = None,
    rounds: int = 5,
    per_round: int = 2,
    skip_compile: str | None = None,
    startup_calls: int = 5,
) -> list[dict[str, Any]]:
    """Each variant's step on `example`, timed interleaved over `rounds` rounds after its first `startup_calls`
    calls, timed alone as its start-up (compilation, recompilation as optimizer state appears, autotuning: their time
    beyond as many normal steps); one row per variant with the median ms and its range, the
    start-up seconds, what was applied, and after how many steps the start-up is paid back against the first row.
    `skip_compile` (a reason) leaves the compile rows out, saying why; a cudnn.benchmark row on CUDA is left out
    with the reason (CUDNN_BENCHMARK_UNMEASURED), and the flag is as it was afterwards."""
    device = torch.device(device)
    variants = variants if variants is not None else speedup_variants(device)
    # torch.compile logs what it finds missing (no CUDA runtime on a CPU, ignored profiler ranges) as warnings on
    # stderr; the rows say what ran and what was skipped, so only its errors are kept
    logging.getLogger("torch").setLevel(max(logging.getLogger("torch").level, logging.ERROR))
    rows: list[dict[str, Any]] = []
    calls: dict[str, Callable[[], Any]] = {}
    benchmark_before = torch.backends.cudnn.benchmark  # each build sets the process-wide flag
    try:
        for name, options in variants.items():
            unmeasured = _unmeasured(options, device, skip_compile)
            if unmeasured is not None:
                rows.append({"name": name, "skipped": unmeasured})
                continue
            torch.manual_seed(0)
            if options.compile:  # each compile row starts cold, not from the graphs the row before compiled
                torch._dynamo.reset()
            step, notes = build_fast_step(build(), loss_fn, device=device, precision=precision, options=options)
            start = time.perf_counter()
            try:
                with _no_compile_cache(options.compile):
                    for _ in range(startup_calls):
                        step(*example)
            except Exception as error:  # noqa: BLE001 (a compiler that fails here, e.g. on a full disk, skips its row)
                if not options.compile:
                    raise
                failure = f"{type(error).__name__}: {str(error).splitlines()[0][:120]}"
                rows.append({"name": name, "skipped": f"torch.compile failed here ({failure})"})
                continue
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds = time.perf_counter() - start
            rows.append({"name": name, "notes": notes, "first_call_s": seconds, "startup_calls": startup_calls})
            calls[name] = functools.partial(step, *example)
        times = interleaved_times(calls, rounds=rounds, per_round=per_round, warmup=1, device=device)
    finally:
        torch.backends.cudnn.benchmark = benchmark_before
    return _with_payback(rows, times)


@contextlib.contextmanager
def _no_compile_cache(compiling: bool) -> Iterator[None]:
    """Inductor's on-disk graph cache off while a compile row's start-up is timed: a graph an earlier row (or an
    earlier run) compiled would make its start-up look free, where a reader's first run pays it in full."""
    if not compiling:
        yield
        return
    with inductor_config.patch(fx_graph_cache=False):
        yield


def _unmeasured(options: SpeedUps, device: torch.device, skip_compile: str | None) -> str | None:
    """Why a variant is not timed here (None when it is): cudnn.benchmark on CUDA, or a compile that cannot run."""
    if options.cudnn_benchmark and device.type == "cuda":
        return CUDNN_BENCHMARK_UNMEASURED
    if options.compile and (skip_compile or not compiler_status(device.type)[0]):
        return skip_compile or compiler_status(device.type)[1]
    return None


def _with_payback(rows: list[dict[str, Any]], times: dict[str, list[float]]) -> list[dict[str, Any]]:
    """Add median, range, start-up cost and pay-back steps to each measured row, against the first measured row (faster
    only when it is faster in every interleaved round)."""
    base = None
    for row in rows:
        if "skipped" in row:
            continue
        spread = Spread.paired(times[row["name"]])  # interleaved rounds: compared with the baseline round by round
        row.update(step_ms=spread.median, step_ms_range=spread.range)
        row["startup_s"] = max(0.0, row["first_call_s"] - row.get("startup_calls", 1) * row["step_ms"] / 1000)
        base = base or row
        saved_ms = base["step_ms"] - row["step_ms"]
        faster = row is not base and spread.ratio(Spread.paired(times[base["name"]])).high < 1.0
        row["faster"] = faster
        row["pays_off_after"] = max(1, round(1000 * row["startup_s"] / saved_ms)) if faster and saved_ms > 0 else None
    return rows
