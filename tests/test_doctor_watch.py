"""The doctor on a loop as it is: `watch()` around any loop, and `python -m helpers.doctor train.py -- <its
arguments>` on an unchanged argparse ImageFolder script (model and loader built inside its main). The loop's
DataLoader batches and optimizer steps are seen through hooks, blocks of replayed batches give the pre-made
reference, the loop is stopped at its next batch once measured (the code after it does not run, its workers are
shut down), a validation loader read between steps is not timed, and a plan over its budget is said before it
starts."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.dataloader import _BaseDataLoaderIter

from helpers.bottleneck import LABELS
from helpers.doctor import main
from helpers.doctor_watch import DoctorStop, Watch, run_script, watch

ROOT = Path(__file__).resolve().parents[1]


class _Indices(Dataset):
    """Sample i is the tensor [i] and label i % 2: a batch says which samples it holds."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int):
        return torch.tensor([float(index)]), index % 2


def _model_and_optimizer():
    model = nn.Linear(1, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def _train(loader, model, optimizer, seen, epochs=1000, validation=None):
    """A plain loop, as a script has it; `seen` gets every batch's sample indices, `validation` is read every 2 steps."""
    steps = 0
    for _ in range(epochs):
        for inputs, targets in loader:
            seen.append(inputs.view(-1).tolist())
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(inputs), targets).backward()
            optimizer.step()
            steps += 1
            if validation is not None and steps % 2 == 0:
                next(iter(validation))
    seen.append("after the loop")


def test_a_watched_loop_is_measured_fed_and_replayed_then_stopped_at_its_next_batch():
    model, optimizer = _model_and_optimizer()
    loader, seen = DataLoader(_Indices(), batch_size=4, shuffle=True), []
    original_next, original_iter = _BaseDataLoaderIter.__next__, DataLoader.__iter__
    with watch(budget_s=0.01, steps=3, warmup=2, notify=None) as doctor:
        _train(loader, model, optimizer, seen)
    assert "after the loop" not in seen  # stopped at its next batch
    assert _BaseDataLoaderIter.__next__ is original_next and DataLoader.__iter__ is original_iter  # hooks gone
    phases = [(r.phase, r.block) for r in doctor.records]
    assert phases[:2] == [("warmup", -1)] * 2
    for block in range(3):  # one settling step and 3 timed ones per block
        assert phases.count(("fed", block)) == phases.count(("premade", block)) == 4
    fed_batches = [tuple(batch) for batch in seen[2:6]]
    replayed = [tuple(batch) for batch in seen[6:10]]
    assert set(replayed) <= set(fed_batches[-2:])  # the pre-made block replays the last two fed batches
    diagnosis = doctor.diagnosis()
    assert diagnosis.verdict in LABELS and len(diagnosis.readings) == 3
    text = str(diagnosis)
    assert "Measured: your own loop as it ran, watched (watch): 12 batches of its DataLoader" in text
    assert "replayed from memory" in text and f"{doctor.optimizer_steps} optimizer steps ran" in text
    assert doctor.optimizer_steps == len(seen)  # every batch the loop saw got its step; none after the stop
    before = doctor.optimizer_steps
    _train(loader, model, optimizer, [], epochs=1)  # outside the watch nothing is counted or stopped
    assert doctor.optimizer_steps == before


def test_a_loop_that_builds_its_loader_each_epoch_is_measured_and_stopped():
    model, optimizer = _model_and_optimizer()
    dataset, seen = _Indices(), []
    with watch(budget_s=0.01, steps=3, warmup=2, notify=None) as doctor:
        for _ in range(1000):  # 4 batches an epoch: the blocks span several loaders over the same dataset
            _train(DataLoader(dataset, batch_size=16), model, optimizer, seen, epochs=1)
    phases = [(r.phase, r.block) for r in doctor.records]
    for block in range(3):
        assert phases.count(("fed", block)) == phases.count(("premade", block)) == 4
    assert doctor.done and doctor.optimizer_steps < 4 * 20  # stopped within a few epochs, not after 1,000


def test_replayed_batches_are_copies_not_the_batches_already_used():
    model, optimizer = _model_and_optimizer()
    ids = []

    class Loop:
        def __call__(self):
            loader = DataLoader(_Indices(), batch_size=4)
            for _ in range(1000):
                for inputs, targets in loader:
                    ids.append(id(inputs))
                    inputs.add_(1000)  # a loop that changes its batch in place must not change the replays
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(model(inputs), targets).backward()
                    optimizer.step()

    with watch(budget_s=0.01, steps=3, warmup=2, notify=None) as doctor:
        Loop()()
    assert all(value < 1000 for batch in doctor._stored for value in batch[0].view(-1).tolist())


def test_a_validation_loader_read_between_steps_is_not_timed():
    model, optimizer = _model_and_optimizer()
    train, validation = DataLoader(_Indices(), batch_size=4), DataLoader(_Indices(), batch_size=8)
    with watch(budget_s=0.01, steps=3, warmup=2, notify=None) as doctor:
        _train(train, model, optimizer, [], validation=validation)
    assert doctor._train is train  # the loader whose batches the optimizer steps followed
    # every second interval read a validation batch: only the others were timed, so it took twice the steps
    assert doctor.optimizer_steps >= 2 * len(doctor.records) - 2


def test_the_workers_are_shut_down_when_the_loop_is_stopped():
    model, optimizer = _model_and_optimizer()
    others = {p.pid for p in psutil.Process().children()}  # what other tests left running is not this loader's

    def workers():
        alive = [p for p in psutil.Process().children() if p.pid not in others and p.is_running()]
        return [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]

    loader = DataLoader(_Indices(), batch_size=4, num_workers=1, persistent_workers=True)
    started = []
    with watch(budget_s=0.01, steps=3, warmup=2, notify=None):
        for _ in range(1000):
            for inputs, targets in loader:
                started = started or workers()  # the worker, alive while the loop runs
                optimizer.zero_grad()
                nn.functional.cross_entropy(model(inputs), targets).backward()
                optimizer.step()
    assert started and loader._iterator is None  # the loader starts fresh workers if it is read again
    deadline = time.monotonic() + 10
    while workers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not workers()
    assert len(list(loader)) == 16  # and it still works


def test_a_plan_over_its_budget_is_said_before_the_blocks_start():
    said = []
    model, optimizer = _model_and_optimizer()

    class Slow(Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, index):
            time.sleep(0.002)
            return torch.tensor([float(index)]), index % 2

    loader = DataLoader(Slow(), batch_size=4)
    doctor = Watch(budget_s=0.001, warmup=2, notify=lambda line: said.append((line, len(doctor.records))))
    with doctor:
        _train(loader, model, optimizer, [])
    ((line, records),) = said
    assert records == 2  # after the two warm-up steps, before any timed block
    assert "over budget_s=0.001" in line and "3 steps per block is the least" in line
    assert doctor.plan is not None and doctor.plan.steps == 3  # the minimum, whatever the budget
    assert "over budget_s=0.001" in str(doctor.diagnosis())


def test_a_larger_budget_buys_more_steps():
    small, large = Watch(budget_s=1.0), Watch(budget_s=10.0)
    for doctor in (small, large):
        doctor.records = [type("R", (), {"wait": 0.01, "compute": 0.04})() for _ in range(3)]  # 50 ms a step
        doctor.notify = None
        doctor._advance()
        doctor.meter.stop()
    assert small.plan is not None and large.plan is not None
    assert small.plan.steps == 3 and small.plan.over_budget  # 1 s buys 3 pairs a block, one of them settling
    assert large.plan.steps == 32 and not large.plan.over_budget  # 10 s: 33 pairs a block at 0.1 s, one settling


def test_doctor_stop_is_not_an_exception_a_script_swallows():
    assert issubclass(DoctorStop, BaseException) and not issubclass(DoctorStop, Exception)


# --- an unchanged argparse ImageFolder training script ---

SCRIPT = '''
    """An ordinary ImageFolder classifier script: argparse, the model and the loader built inside main()."""
    import argparse

    import torch
    from torch import nn
    from torchvision import datasets, transforms


    def main():
        parser = argparse.ArgumentParser(description="train a small classifier on an ImageFolder")
        parser.add_argument("data")
        parser.add_argument("--epochs", type=int, default=90)
        parser.add_argument("--batch-size", type=int, default=4)
        parser.add_argument("--workers", type=int, default=0)
        parser.add_argument("--lr", type=float, default=0.1)
        args = parser.parse_args()
        transform = transforms.Compose(
            [transforms.RandomResizedCrop(32), transforms.RandomHorizontalFlip(), transforms.ToTensor()]
        )
        train_set = datasets.ImageFolder(args.data, transform=transform)
        loader = torch.utils.data.DataLoader(
            train_set, batch_size=args.batch_size, shuffle=True, num_workers=args.workers
        )
        model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
        for epoch in range(args.epochs):
            for images, targets in loader:
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(images), targets)
                loss.backward()
                optimizer.step()
            print(f"epoch {epoch}: loss {loss.item():.3f}")
        torch.save(model.state_dict(), "model.pt")
        print("TRAINING DONE")


    if __name__ == "__main__":
        main()
'''


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("folder")
    rng = np.random.default_rng(0)
    for name in ("cat", "dog"):
        (root / name).mkdir()
        for i in range(6):
            pixels = rng.integers(0, 256, (48 + i, 64, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / name / f"{i}.jpg", quality=90)
    script = root.parent / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    return root, script


def test_python_dash_m_helpers_doctor_runs_an_unchanged_script(image_folder, tmp_path):
    folder, script = image_folder
    command = [sys.executable, "-m", "helpers.doctor", str(script), "--budget-s", "0.2", "--steps", "3"]
    done = subprocess.run(
        [*command, "--", str(folder), "--workers", "1"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "epoch 0: loss" in out  # the script ran as it is, printing what it prints
    assert "TRAINING DONE" not in out and not (tmp_path / "model.pt").exists()  # stopped before the end
    assert "Stopped train.py at its next DataLoader batch" in out and "workers were shut down" in out
    headline = next(line for line in out.splitlines() if line.startswith(LABELS))
    assert "block pairs" in headline and "% of each fed step waits for data" in headline
    assert "Measured: your own loop as it ran, watched (watch)" in out
    assert "Pipeline: DataLoader over ImageFolder; 1 worker" in out and "task: classification" in out


def test_the_scripts_own_failures_are_reported(image_folder, tmp_path, capsys, monkeypatch):
    folder, script = image_folder
    monkeypatch.chdir(tmp_path)
    assert main([str(script), "--", "--no-such-option"]) == 2  # argparse's own exit code
    err = capsys.readouterr().err
    assert "error: the following arguments are required: data" in err and "train.py exited with code 2" in err
    failing = tmp_path / "failing.py"
    failing.write_text("raise RuntimeError('the script broke')\n")
    assert run_script(failing, []) == 1
    err = capsys.readouterr().err
    assert "RuntimeError: the script broke" in err and "failing.py raised an error" in err
    quiet = tmp_path / "quiet.py"
    quiet.write_text("print('no loop here')\n")
    assert run_script(quiet, []) == 1
    assert "quiet.py ended by itself after 0 optimizer steps" in capsys.readouterr().err
    assert run_script(tmp_path / "missing.py", []) == 2
    assert "missing.py: no such script" in capsys.readouterr().err


def test_a_script_that_ends_before_the_plan_is_diagnosed_on_what_it_ran(image_folder, tmp_path, capsys, monkeypatch):
    folder, script = image_folder
    monkeypatch.chdir(tmp_path)
    # 12 images in batches of 4: 3 steps an epoch, the last interval of each lost to the epoch's end; replayed
    # batches do not advance the epoch. Three epochs: 2 warm-up steps, the first fed block, its 4 replayed steps,
    # then 2 steps of the second fed block: one complete block pair, 9 + 4 optimizer steps
    assert run_script(script, [str(folder), "--epochs", "3"], budget_s=0.01, steps=3, warmup=2, notify=None) == 0
    out = capsys.readouterr().out
    assert "TRAINING DONE" in out and "train.py ended by itself after 13 optimizer steps" in out
    headline = next(line for line in out.splitlines() if line.startswith(LABELS))
    assert "over 1 block pair;" in headline


def test_each_batch_request_synchronises_the_steps_device_before_its_clock(monkeypatch):
    import helpers.doctor_watch as doctor_watch

    events = []
    monkeypatch.setattr(doctor_watch, "synchronize", lambda device: events.append(("sync", device.type)))
    ticks = iter(range(10**6))
    monkeypatch.setattr(doctor_watch, "clock", lambda: events.append(("clock",)) or next(ticks) / 1000)
    model, optimizer = _model_and_optimizer()
    with watch(budget_s=0.01, steps=3, warmup=2, notify=None):
        _train(DataLoader(_Indices(), batch_size=4), model, optimizer, [])
    syncs = [i for i, event in enumerate(events) if event[0] == "sync"]
    assert len(syncs) > 20 and all(events[i + 1] == ("clock",) for i in syncs)  # the step's work, then the clock
    assert events[syncs[-1]] == ("sync", "cpu")  # the device the optimizer's parameters are on
