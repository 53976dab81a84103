"""The pipeline doctor on your own training loop, unchanged: while a `watch()` is open, every DataLoader iterator's
`__next__` is timed (data-wait) against the time from one batch to the loop's next request (compute), the device
synchronised at each request; the optimizer's steps are seen through PyTorch's global optimizer step hook. After a
few warm-up steps it alternates blocks of the loop fed by its loader with blocks of the same loop on the last batches
replayed from memory (pre-made: the loader's work removed, its workers idle), then stops the loop at its next batch
by raising DoctorStop (a BaseException: `except Exception` in your code does not swallow it; `finally` blocks run)
and diagnoses.

    with watch(budget_s=10) as doctor:
        train(args)              # your loop as it is; `python -m helpers.doctor train.py -- <args>` does this for a script
    print(doctor.diagnosis())

The loop trains on the replayed batches too: the doctor measures, it does not keep the run. The training loader is
the one whose batches are followed by optimizer steps; an interval in which another DataLoader (a validation one)
was read, or no optimizer step ran (the first micro-batches of a gradient accumulation), is not timed. Only
DataLoader iterators are seen: a loader of another kind is measured with `doctor.diagnose` instead.

Example:
    >>> data = torch.utils.data.TensorDataset(torch.randn(64, 3), torch.randint(0, 2, (64,)))
    >>> model, loader = torch.nn.Linear(3, 2), DataLoader(data, batch_size=8)
    >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> with watch(budget_s=0.01, blocks=2, steps=3, warmup=2, notify=None) as doctor:
    ...     for epoch in range(100):  # stopped at its next batch once measured
    ...         for inputs, targets in loader:
    ...             optimizer.zero_grad()
    ...             torch.nn.functional.cross_entropy(model(inputs), targets).backward()
    ...             optimizer.step()
    >>> doctor.diagnosis().method, doctor.diagnosis().trained_steps  # print(doctor.diagnosis()) to read it all
    ('your own loop as it ran, watched (watch)', 18)

Copy with: diagnosis.py (the report) with bottleneck.py, doctor_advice.py, pipeline_facts.py, env.py, loadmeter.py,
measure.py, memory.py, pipeline_result.py and spread.py.
Needs: psutil, torch.
"""

from __future__ import annotations

import runpy
import statistics
import sys
import time
import traceback
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils.data import DataLoader
from torch.utils.data.dataloader import _BaseDataLoaderIter

from .diagnosis import Diagnosis, Notify, Plan, build_diagnosis, copy_ms, notify_stderr, plan_blocks
from .loadmeter import LoadMeter
from .measure import clock, count_samples, synchronize
from .pipeline_facts import describe_batch, describe_pipeline

REPLAYED = 2  # batches kept for the pre-made blocks
NO_STEP_LIMIT = 200  # batches read with no optimizer step after any of them: nothing here is a training loop


class DoctorStop(BaseException):
    """Raised at a watched loop's next batch once the doctor has measured what it planned."""


@dataclass
class _Record:
    """One batch of the training loader: its data-wait, the compute after it, and the phase it was fetched in."""

    phase: str  # "warmup", "fed" or "premade"
    block: int
    wait: float
    compute: float
    samples: int


def _clone(batch: Any) -> Any:
    """A fresh copy of a batch's tensors (pinned memory stays pinned), so a replayed batch is never one already used."""
    if isinstance(batch, torch.Tensor):
        copied = batch.clone()
        return copied.pin_memory() if batch.is_pinned() else copied
    if isinstance(batch, dict):
        return {key: _clone(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_clone(value) for value in batch)
    return batch


def _same_dataset(loader: Any, train: Any) -> bool:
    dataset = getattr(loader, "dataset", None)
    return dataset is not None and dataset is getattr(train, "dataset", None)


class Watch:
    """Times your loop's DataLoader batches and optimizer steps while open (see the module's docstring); `budget_s`
    buys steps per block from the warm-up's step time (`steps` fixes them), at least MINIMUM_STEPS, said up front
    through `notify` when that already exceeds the budget; `settle` steps open each block untimed (the workers'
    queue filling or draining); `stop=False` records without stopping the loop."""

    active: Watch | None = None

    def __init__(
        self,
        *,
        budget_s: float = 10.0,
        blocks: int = 3,
        steps: int | None = None,
        warmup: int = 3,
        settle: int = 1,
        stop: bool = True,
        notify: Notify | None = notify_stderr,
    ) -> None:
        self.budget_s, self.blocks, self.fixed_steps, self.warmup, self.settle = budget_s, blocks, steps, warmup, settle
        self.stop, self.notify = stop, notify
        self.records: list[_Record] = []
        self.phases: list[tuple[str, int]] = [("warmup", -1)]
        self.plan: Plan | None = None
        self.optimizer_steps = self.replayed = self.batches_read = 0
        self.device = torch.device("cpu")
        self.done, self.stopped, self.threads = False, "", torch.get_num_threads()
        self.meter = LoadMeter()
        self._loader_of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._iterators: weakref.WeakSet = weakref.WeakSet()
        self._train: Any = None  # the training loader (or its iterator, when it was created before the watch)
        self._candidate: Any = None
        self._pending: tuple[Any, float, float, tuple[str, int], int] | None = None
        self._steps_since, self._foreign = 0, False
        self._stored: list[Any] = []
        self._first: dict[str, Any] | None = None
        self._started = time.perf_counter()
        self._undo: list[Any] = []

    # --- the hooks ---

    def __enter__(self) -> Watch:
        if Watch.active is not None:
            raise RuntimeError("a doctor watch is already open: close it before opening another")
        Watch.active, watcher = self, self
        original_next, original_iter = _BaseDataLoaderIter.__next__, DataLoader.__iter__

        def timed_next(iterator: _BaseDataLoaderIter) -> Any:
            return watcher._next(iterator, original_next)

        def noted_iter(loader: DataLoader) -> Any:
            iterator = original_iter(loader)
            watcher._loader_of[iterator] = loader
            return iterator

        _BaseDataLoaderIter.__next__ = timed_next  # type: ignore[method-assign, assignment]
        DataLoader.__iter__ = noted_iter  # type: ignore[method-assign]
        handle = register_optimizer_step_post_hook(lambda optimizer, args, kwargs: self._stepped(optimizer))
        self._undo = [
            lambda: setattr(_BaseDataLoaderIter, "__next__", original_next),
            lambda: setattr(DataLoader, "__iter__", original_iter),
            handle.remove,
        ]
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> bool:
        for undo in self._undo:
            undo()
        Watch.active = None
        if isinstance(error, DoctorStop):
            self._shut_down_workers()
            return True
        return False

    def _shut_down_workers(self) -> None:
        """Stop the worker processes of every DataLoader iterator the loop was reading (the stop left them alive)."""
        for iterator in list(self._iterators):
            loader = self._loader_of.get(iterator)
            if loader is not None and getattr(loader, "_iterator", None) is iterator:
                loader._iterator = None  # a persistent-workers loader would otherwise hand this dead iterator out
            shutdown = getattr(iterator, "_shutdown_workers", None)
            if callable(shutdown):
                shutdown()

    def _stepped(self, optimizer: torch.optim.Optimizer) -> None:
        """The optimizer step hook: count it, learn the device, and name the loader that fed it the training one."""
        self.optimizer_steps += 1
        self._steps_since += 1
        if self._train is None and self._candidate is not None:
            self._train = self._candidate
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                self.device = parameter.device
                return

    def _next(self, iterator: _BaseDataLoaderIter, original: Any) -> Any:
        """One watched `__next__`: close the interval before it, fetch (or replay) the batch, open the next."""
        if self.done and self.stop:
            raise DoctorStop(self._stop_reason())
        self._iterators.add(iterator)
        key = self._loader_of.get(iterator, iterator)
        if self._train is not None and key is not self._train and _same_dataset(key, self._train):
            self._train = key  # a new DataLoader over the training set: the loop builds its loader each epoch
        ours = self._train is None or key is self._train
        synchronize(self.device)  # the step's queued device work belongs to the interval it closes
        start = clock()
        if not ours:
            self._foreign = True
        else:
            self._close(key, start)
            if self.done and self.stop:
                raise DoctorStop(self._stop_reason())
        replay = ours and not self.done and self.phases[-1][0] == "premade" and self._train is not None
        replay = replay and bool(self._stored)
        if replay:
            batch = _clone(self._stored[self.replayed % len(self._stored)])
            self.replayed += 1
        else:
            try:
                batch = original(iterator)
            except StopIteration:
                self._pending = None if ours else self._pending
                raise
        end = clock()
        self.batches_read += 1
        if ours:
            handed = end
            if not replay:
                self._first = self._first or describe_batch(batch)
                if self.phases[-1][0] == "fed":  # kept as it is now: the loop may change its batch in place
                    self._stored = [*self._stored, _clone(batch)][-REPLAYED:]
                    handed = clock()  # the copy is the doctor's time: the loop's compute starts after it
            self._pending, self._candidate = (key, handed, end - start, self.phases[-1], count_samples(batch)), key
            self._steps_since, self._foreign = 0, False
        if self.optimizer_steps == 0 and self.batches_read >= NO_STEP_LIMIT:
            self.done = True  # nothing to measure: no batch here is followed by a training step
        return batch

    # --- the plan: warm-up, then fed / pre-made blocks ---

    def _close(self, key: Any, now: float) -> None:
        """Record the interval since the training loader's last batch, when a step ran in it and nothing else read."""
        if self._pending is None or self._pending[0] is not key or not self._steps_since or self._foreign:
            self._pending = None
            return
        _, exit_time, wait, (phase, block), samples = self._pending
        self._pending = None
        self.records.append(_Record(phase, block, wait, now - exit_time, samples))
        wanted = self.warmup if phase == "warmup" else self.settle + (self.plan.steps if self.plan else 0)
        if phase == self.phases[-1][0] and block == self.phases[-1][1]:
            if sum(r.phase == phase and r.block == block for r in self.records) >= wanted:
                self._advance()

    def _advance(self) -> None:
        """Move to the next phase; after the warm-up, plan the blocks from its step time (saying so if over budget)."""
        kind, block = self.phases[-1]
        if kind == "warmup":
            steps = [r.wait + r.compute for r in self.records[1:]] or [self.records[0].wait + self.records[0].compute]
            pair = 2 * statistics.median(steps)  # a fed and a replayed step, each about one step of the loop
            self.plan = plan_blocks(self.budget_s, pair, blocks=self.blocks, steps=self.fixed_steps, settle=self.settle)
            if self.plan.over_budget and self.notify is not None:
                self.notify(self.plan.note())
            self.threads = torch.get_num_threads()
            self.meter.start()
            self.phases.append(("fed", 0))
            return
        self.meter.stop()
        if kind == "fed":
            self.phases.append(("premade", block))
        elif block + 1 < self.blocks:
            self.phases.append(("fed", block + 1))
        else:
            self.done = True
            return
        self.meter.start()

    def _stop_reason(self) -> str:
        if self.optimizer_steps == 0:
            return f"no optimizer step followed any of {self.batches_read} DataLoader batches: nothing to measure"
        return f"measured {len(self.records)} batches over {self.optimizer_steps} optimizer steps"

    # --- the report ---

    def _blocks(self) -> dict[str, list[float]]:
        """Per complete fed / pre-made block pair: mean wait and compute (ms), pre-made compute, efficiency, fed/s."""
        numbers: dict[str, list[float]] = {"wait": [], "compute": [], "premade": [], "efficiency": [], "fed": []}
        for block in range(self.blocks):
            fed = [r for r in self.records if r.phase == "fed" and r.block == block][self.settle :]
            premade = [r for r in self.records if r.phase == "premade" and r.block == block][self.settle :]
            if not fed or not premade:
                continue
            wait = 1000 * statistics.fmean(r.wait for r in fed)  # means, so wait + compute is the fed step
            compute = 1000 * statistics.fmean(r.compute for r in fed)
            reference = 1000 * statistics.fmean(r.compute for r in premade)
            numbers["wait"].append(wait)
            numbers["compute"].append(compute)
            numbers["premade"].append(reference)
            numbers["efficiency"].append(reference / max(wait + compute, 1e-12))
            numbers["fed"].append(sum(r.samples for r in fed) / max(sum(r.wait + r.compute for r in fed), 1e-12))
        return numbers

    def diagnosis(self) -> Diagnosis:
        """The diagnosis of what was watched (ValueError, saying what is missing, when no block pair completed)."""
        numbers = self._blocks()
        if not numbers["wait"]:
            raise ValueError(
                f"no complete fed / pre-made block pair was measured ({self._stop_reason()}; the loop read "
                f"{self.batches_read} batches): it needs {self.warmup} warm-up steps, then {self.settle} + "
                f"{self.plan.steps if self.plan else 'N'} steps per block, each followed by an optimizer step"
            )
        loader = self._train if self._train is not None else self._candidate
        facts = describe_pipeline(loader, None, self.device, self._first)
        facts.intra_op_threads = self.threads
        copy = copy_ms(self._stored[-1], self.device) if self._stored else None
        fed = sum(r.phase == "fed" for r in self.records)
        plan = self.plan.note() if self.plan else ""
        measured = (
            f"{fed} batches of its {type(loader).__name__} in {len(numbers['wait'])} fed "
            f"blocks (data-wait: inside the DataLoader iterator's __next__; compute: from a batch to the loop's next "
            f"request, the device synchronised at each request), against {self.replayed} steps of the same loop on "
            f"its last {len(self._stored)} batches replayed from memory (pre-made: no loading work; its workers idle "
            f"once their queue is full), after {self.warmup} warm-up steps, the first {self.settle} of each block "
            "untimed."
        )
        return build_diagnosis(
            numbers,
            facts,
            self.meter.total(),
            copy=copy,
            trained_steps=self.optimizer_steps,
            replayed_steps=self.replayed,
            seconds=time.perf_counter() - self._started,
            budget_s=self.budget_s,
            method="your own loop as it ran, watched (watch)",
            measured=measured,
            plan=plan,
            stopped=self.stopped,
        )

    def __str__(self) -> str:
        return str(self.diagnosis())


def watch(**options: Any) -> Watch:
    """`with watch(budget_s=10) as doctor: <your loop>`, then `print(doctor.diagnosis())`; see Watch."""
    return Watch(**options)


def run_script(script: str | Path, arguments: list[str], **options: Any) -> int:
    """Run a training script as `python script.py <arguments>` would, watched; stop it once measured, print the
    diagnosis and return 0 (the script's own exit code, or 1, when it failed or nothing could be measured)."""
    path = Path(script)
    if not path.is_file():
        print(f"helpers.doctor: {path}: no such script; give the path of your training script", file=sys.stderr)
        return 2
    saved_argv, saved_path, code = sys.argv, list(sys.path), 0
    sys.argv, sys.path = [str(path), *arguments], [str(path.resolve().parent), *sys.path]
    doctor = Watch(**options)
    try:
        with doctor:
            runpy.run_path(str(path), run_name="__main__")
        if doctor.done:
            doctor.stopped = (
                f"Stopped {path.name} at its next DataLoader batch ({doctor._stop_reason()}): the doctor raised "
                "DoctorStop there, so its `finally` blocks ran and the code after its loop did not; its DataLoader "
                "workers were shut down."
            )
        else:
            doctor.stopped = f"{path.name} ended by itself after {doctor.optimizer_steps} optimizer steps."
    except SystemExit as exit_:  # argparse's errors, sys.exit() in the script
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        doctor.stopped = f"{path.name} exited with code {code} after {doctor.optimizer_steps} optimizer steps."
    except Exception:  # noqa: BLE001 (the script's own error: shown, then what was measured before it)
        traceback.print_exc()
        code = 1
        doctor.stopped = f"{path.name} raised an error after {doctor.optimizer_steps} optimizer steps (above)."
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    try:
        print(doctor.diagnosis())
    except ValueError as error:
        print(f"helpers.doctor: {doctor.stopped} {error}", file=sys.stderr)
        return code or 1
    return code
