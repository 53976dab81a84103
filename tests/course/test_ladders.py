"""The course's ladders: memory accounting by scale, the bench command line, the JPEG decoder table."""

from __future__ import annotations

import json

import numpy as np
import torch
from PIL import Image

from helpers.course.decoders import jpeg_decode_benchmark
from helpers.course.ladders import main, sr_memory_by_scale


def _photos(tmp_path, count=3):
    rng = np.random.default_rng(0)
    for i in range(count):
        Image.fromarray(rng.integers(0, 256, (130, 150, 3), dtype=np.uint8)).save(tmp_path / f"p{i}.png")
    return sorted(tmp_path.glob("*.png"))


def test_memory_accounting_by_scale(tmp_path):
    rows = sr_memory_by_scale(_photos(tmp_path), scales=(2, 4))
    for row in rows:
        s = row["scale"]
        # float32 inputs at HR size against uint8 LR: 4 bytes x s^2 pixels (exact up to the mod-crop)
        assert abs(row["input_ratio"] - 4 * s * s) < 0.02 * 4 * s * s
        # float32 input + HR (8 bytes per HR pixel per channel) against RGBX uint8 HR + LR (4/3 per channel)
        assert abs(row["total_ratio"] - 6 / (1 + 1 / s**2)) < 0.02 * row["total_ratio"]


def test_bench_cli_writes_the_ladder_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    monkeypatch.setenv("COURSE_PROFILE", "smoke")
    out = tmp_path / "sr.json"
    assert main(["sr", "--json", str(out), "--hr-crop", "48", "--batch-size", "4"]) == 0
    payload = json.loads(out.read_text())
    rungs = payload["rungs"]
    assert rungs[0]["name"].startswith("naive: pre-upscaled files from disk") and rungs[0]["role"] == "seed post"
    assert any("lazy" in r["name"] for r in rungs)
    for rung in rungs:
        assert rung["loader_samples_per_s"] > 0 and rung["pipeline_efficiency"] > 0 and rung["load"]["cores"] >= 1
    assert payload["profile"] == "smoke" and payload["device"] == "cpu" and "dirty" in payload and "commit" in payload
    assert payload["load"]["cores"] >= 1
    assert "| rung |" in capsys.readouterr().out


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


EARLIER: set[int] = set()  # child processes that other tests left: not a rung's workers


def _worker_rung(name, seen):
    import psutil
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from helpers.course.ladders import Rung

    def build():
        data = TensorDataset(torch.zeros(64, 3), torch.zeros(64, 1))
        return DataLoader(data, batch_size=4, num_workers=1, persistent_workers=True)

    def make_step(model):
        def step(batch):
            alive = [
                c
                for c in psutil.Process().children(recursive=True)
                if c.pid not in EARLIER and c.status() != psutil.STATUS_ZOMBIE
            ]
            seen.append((name, len(alive), torch.get_num_threads()))
            model(batch[0]).sum().backward()

        return step

    return Rung(name, build, lambda: nn.Linear(3, 1), workers=1, make_step=make_step, role=name)


def test_only_the_rung_whose_turn_it_is_has_live_workers_and_threads_are_restored(capsys, monkeypatch):
    import psutil

    from helpers.course import ladders
    from helpers.course.ladders import run_ladder
    from helpers.env import usable_cpu_count

    monkeypatch.setattr(ladders, "busy_cores", lambda: 0)  # a quiet machine (the busy case: the test below)
    seen, before = [], torch.get_num_threads()
    EARLIER.clear()
    EARLIER.update(c.pid for c in psutil.Process().children(recursive=True))  # left by other tests: not the rungs'
    rows, timing = run_ladder(
        [_worker_rung("a", seen), _worker_rung("b", seen)], device=torch.device("cpu"), rounds=3, turn_s=0.05
    )
    assert torch.get_num_threads() == before  # restored after the ladder
    assert {name for name, _, _ in seen} == {"a", "b"}
    assert max(alive for _, alive, _ in seen) == 1  # its own worker, never the other rung's as well
    assert {threads for _, _, threads in seen} == {max(1, usable_cpu_count() - 1)}  # the workers' core left to them
    assert "CPU budget on" in timing and "'a' 1 worker + " in timing
    assert [
        c
        for c in psutil.Process().children(recursive=True)
        if c.pid not in EARLIER and c.status() != psutil.STATUS_ZOMBIE
    ] == []
    assert [r["role"] for r in rows] == ["a", "b"] and all(r["load"]["cores"] >= 1 for r in rows)


def test_a_ladder_leaves_the_cores_other_processes_keep_busy(monkeypatch):
    from helpers.course import ladders

    monkeypatch.setattr(ladders, "usable_cpu_count", lambda: 4)
    monkeypatch.setattr(ladders, "busy_cores", lambda: 1)  # one core taken by another process as the ladder starts
    seen = []
    _, timing = ladders.run_ladder([_worker_rung("a", seen)], device=torch.device("cpu"), rounds=3, turn_s=0.05)
    assert {threads for _, _, threads in seen} == {2}  # 4 cores - its 1 worker - 1 busy core
    assert "1 of them kept busy by other processes" in timing and "'a' 1 worker + 2 intra-op threads" in timing


def test_the_sr_ladder_keeps_its_workers_within_the_cpu_budget(tmp_path):
    from helpers.course.ladders import sr_ladder
    from helpers.env import usable_cpu_count

    rungs = sr_ladder(_photos(tmp_path), device=torch.device("cpu"), batch_size=2, hr_crop=32, workers=64)
    assert all(r.workers + max(1, usable_cpu_count() - r.workers) <= max(2, usable_cpu_count()) for r in rungs)
    assert [r.role for r in rungs] == ["seed post", "in memory", "lazy crop", "lazy crop, workers", "decoded cache"]


def test_the_notebooks_build_their_ladders_through_the_benchs_path():
    # one construction path: a notebook that assembled its own rungs could drift from python -m helpers.course.bench
    import inspect
    from pathlib import Path

    import nbformat

    from helpers.course import ladders

    notebooks = Path(__file__).resolve().parents[2] / "notebooks"
    for pattern, path in (("measure_sr_ladder(", "sr"), ("measure_cifar_ladder(", "cifar")):
        assert pattern in inspect.getsource(getattr(ladders, f"_{path}_command"))
        users = [
            p.name
            for p in sorted(notebooks.glob("*.ipynb"))
            if pattern in "\n".join(c.source for c in nbformat.read(p, 4).cells if c.cell_type == "code")
        ]
        assert users, f"no notebook runs {pattern}"
    for p in sorted(notebooks.glob("*.ipynb")):
        code = "\n".join(c.source for c in nbformat.read(p, 4).cells if c.cell_type == "code")
        assert "run_ladder(" not in code, f"{p.name} runs a ladder of its own making: use measure_*_ladder"


def _cifar_rungs(images, labels, folder, **kw):
    """A tiny CIFAR ladder on the CPU (batch 4, an identity model), its rungs by role."""
    from torch import nn

    from helpers.course.ladders import cifar_ladder

    built = cifar_ladder(
        images,
        labels,
        image_folder=folder,
        device=torch.device("cpu"),
        batch_size=4,
        seed_batch=2,
        model=lambda: nn.Identity(),
        **kw,
    )
    return {r.role: r for r in built}


def test_the_cifar_ladders_device_rung_uses_the_augmentation_it_is_given(tmp_path):
    import kornia.augmentation as K
    from torch import nn

    from helpers.augment import cifar_train_augment

    images, labels = torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8), torch.arange(8) % 10

    def rungs(**kw):
        return _cifar_rungs(images, labels, tmp_path, **kw)

    default = rungs()["device"].build().augment
    assert type(default) is type(cifar_train_augment()) and "crop, flip" in rungs()["device"].name

    def rotated():  # 04's Try it 1: a rotation on the floats, before Normalize
        base = cifar_train_augment()
        return nn.Sequential(*base[:-1], K.RandomRotation(15.0), base[-1])

    mine = rungs(augment=rotated)
    loader = mine["device"].build()
    assert any(isinstance(m, K.RandomRotation) for m in loader.augment) and "your kornia" in mine["device"].name
    assert next(iter(loader))[0].shape == (4, 3, 32, 32)
    ceiling = mine["ceiling"].build().augment  # the ceiling: the rotated rung's Normalize, no random work
    assert not any(isinstance(m, (K.RandomRotation, K.ColorJitter)) for m in ceiling.modules())


def test_the_cifar_ceiling_feeds_the_same_dtype_layout_and_normalisation_as_the_rung_it_bounds(tmp_path):
    # the ceiling once yielded uint8 NCHW, so its step converted and changed layout itself and ran slower than the
    # augmented rung it bounds: a ceiling does the bounded rung's final conversion, with no random work
    from torch import nn

    from helpers.augment import CIFAR10_MEAN, CIFAR10_STD, NormalizeToFloat

    image = torch.randint(0, 256, (1, 3, 32, 32), dtype=torch.uint8)
    images, labels = image.repeat(8, 1, 1, 1), torch.arange(8) % 10  # every sample the same: batches are known

    def batches(**kw):
        rungs = _cifar_rungs(images, labels, tmp_path, **kw)
        assert rungs["ceiling"].bounds == "device"
        return next(iter(rungs["device"].build()))[0], next(iter(rungs["ceiling"].build()))[0]

    augmented, ceiling = batches()
    assert ceiling.dtype == augmented.dtype == torch.float32
    assert ceiling.is_contiguous(memory_format=torch.channels_last)
    assert augmented.is_contiguous(memory_format=torch.channels_last)
    mean, std = torch.tensor(CIFAR10_MEAN).view(1, 3, 1, 1), torch.tensor(CIFAR10_STD).view(1, 3, 1, 1)
    torch.testing.assert_close(ceiling, ((image / 255 - mean) / std).expand(4, -1, -1, -1))
    mine = NormalizeToFloat((0.5, 0.5, 0.5), (0.25, 0.25, 0.25), channels_last=False)  # an augmentation's own
    augmented, ceiling = batches(augment=lambda: nn.Sequential(mine))
    torch.testing.assert_close(ceiling, augmented)
    assert ceiling.is_contiguous() and not ceiling.is_contiguous(memory_format=torch.channels_last)


def test_a_ladder_rows_efficiency_is_its_printed_fed_median_over_its_printed_premade_median():
    # 04's table printed an efficiency (the median of per-round ratios) that the fed and pre-made columns beside it
    # contradicted: dividing the two printed medians must give the printed efficiency, its range the rounds' ratios
    from torch import nn

    from helpers.course.ladders import PipelineProbe, Rung, _row, _Turn, ladder_table

    probe = PipelineProbe([(torch.zeros(4, 3), torch.zeros(4, 1))], lambda batch: None, torch.device("cpu"), premade=1)
    probe.alone = [(1.0, 500), (1.0, 600), (1.0, 700)]
    probe.fed = [(1.0, 100), (1.0, 300), (1.0, 200)]  # median 200
    probe.premade = [(1.0, 200), (1.0, 200), (1.0, 1000)]  # median 200; the rounds' ratios 0.5, 1.5, 0.2
    probe.waits, probe.computes = [[0.01]] * 3, [[0.02]] * 3
    rung = Rung("r", lambda: [], lambda: nn.Identity(), role="r")
    row = _row(_Turn(rung, probe), cores=2)
    assert row["fed_samples_per_s"] == 200 and row["premade_samples_per_s"] == 200
    assert row["pipeline_efficiency"] == 1.0 and row["efficiency_range"] == (0.2, 1.5)
    row["loader_vs_first"] = 1.0
    table = ladder_table([row])
    assert "| 200 (100–300) | 200 (200–1000) | 1.00 (0.20–1.50, >1 is noise) |" in table
    assert "efficiency is the fed median over the pre-made median" in table
    assert "differ with their intra-op threads" not in table  # one rung: nothing to explain
    other = {**row, "name": "w", "threads": 1, "workers": 1}
    row["threads"] = 2
    assert "differ with their intra-op threads (the CPU budget" in ladder_table([row, other])
    assert "'r' 2 threads, 'w' 1 thread" in ladder_table([row, other])
    assert "differ with their intra-op threads" not in ladder_table([row, {**other, "model_note": "another"}])


def test_the_benchmark_steps_hand_the_model_one_layout_whichever_a_rung_sends():
    # 02's ladder: the decoded cache's RGBX crops arrive channels-last-strided, the lazy crops NCHW; the same ESPCN
    # then ran at another speed per rung, and the pre-made baselines of one model differed up to 9x
    from torch import nn

    from helpers.course.ladders import classification_train_step, sr_train_step

    seen = []

    class Recorder(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(1))

        def forward(self, x):
            seen.append((x.dtype, x.is_contiguous(), x.is_contiguous(memory_format=torch.channels_last)))
            return x * self.weight

    rgbx = torch.randint(0, 256, (2, 8, 8, 4), dtype=torch.uint8)[..., :3].permute(0, 3, 1, 2)  # the cache's crops
    nchw = torch.rand(2, 3, 8, 8)
    step = sr_train_step(Recorder())
    step((rgbx, rgbx)), step((nchw, nchw))
    assert seen == [(torch.float32, True, False)] * 2
    seen.clear()
    step = classification_train_step(nn.Sequential(Recorder(), nn.Flatten(), nn.LazyLinear(10)))
    step((nchw, torch.tensor([0, 1]))), step((nchw.contiguous(memory_format=torch.channels_last), torch.tensor([2, 3])))
    assert seen == [(torch.float32, False, True)] * 2


def test_the_posts_batch_is_timed_with_the_rungs_threads_and_says_its_predicted_step():
    # 04's note said "steps of about 1 s" (the target) and timed the step with other threads than the rung's
    from torch import nn

    from helpers.course.ladders import seed_post_batch

    threads_seen, before = [], torch.get_num_threads()

    class Recorder(nn.Module):
        def forward(self, x):
            threads_seen.append(torch.get_num_threads())
            return x

    def model():
        return nn.Sequential(Recorder(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 10))

    batch, why = seed_post_batch(model, device=torch.device("cpu"), wanted=4, step_s=10.0, threads=1)
    assert batch == 4 and "predicted step" in why and "with the rung's 1 intra-op thread" in why
    assert threads_seen[-3:] == [1, 1, 1] and torch.get_num_threads() == before  # warm-up, probe, check; restored


def test_rounds_stop_at_the_budget_after_the_minimum_and_the_bar_ends_where_they_stopped(monkeypatch):
    from torch import nn

    from helpers.course import ladders
    from helpers.course.ladders import MIN_ROUNDS, Rung

    bars = []

    class RecordingBar:
        def __init__(self, iterable=None, total=None, **kwargs):
            self.iterable, self.total, self.n, self.desc = iterable, total, 0, kwargs.get("desc")
            bars.append(self)

        def __iter__(self):
            return iter(self.iterable)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, count):
            self.n += count

        def refresh(self):
            pass

    def build():
        return [(torch.zeros(4, 3), torch.zeros(4, 1))] * 4

    def make_step(model):
        return lambda batch: model(batch[0]).sum().backward()

    rung = Rung("quick", build, lambda: nn.Linear(3, 1), workers=0, make_step=make_step, role="quick")
    monkeypatch.setattr(ladders, "tqdm", RecordingBar)
    monkeypatch.setattr(ladders, "busy_cores", lambda: 0)
    # a budget of 8 rounds x 2 rungs x 1 µs: every round past the minimum would pass it
    rows, timing = ladders.run_ladder([rung, rung], device=torch.device("cpu"), rounds=8, turn_s=1e-6)
    (rounds_bar,) = [bar for bar in bars if bar.desc == "ladder rounds"]
    assert f"{MIN_ROUNDS} of 8 rounds took" in timing
    assert rounds_bar.n == rounds_bar.total == MIN_ROUNDS * 2  # ends at what ran, not at 16
    assert all(row["rounds"] == MIN_ROUNDS for row in rows)


def test_the_doctor_reads_the_efficiency_the_table_prints(monkeypatch):
    """Fed median over pre-made median (80 / 100 = 0.8), with its range: not the probe's own median of block ratios
    (0.5 here), which a reader cannot compute from the table."""
    import types

    from helpers.course import ladders
    from helpers.pipeline_result import PipelineResult

    fed = PipelineResult(80.0, 100.0, 0.5, 1.0, 4.0, 10, 100.0, None, efficiency_range=(0.7, 0.9))
    rates = {"alone": [200.0, 210.0, 190.0], "fed": [80.0, 78.0, 82.0], "premade": [100.0, 99.0, 101.0]}
    probe = types.SimpleNamespace(result=lambda: fed, rates=lambda kind: rates[kind])
    rung = types.SimpleNamespace(name="r", role="r", bounds="", model_note="", workers=2)
    read = []
    monkeypatch.setattr(ladders, "diagnose_pipeline", lambda result, **kwargs: read.append(result) or "VERDICT\nwhy")
    row = ladders._row(ladders._Turn(rung, probe, threads=1), cores=4)
    assert row["pipeline_efficiency"] == 0.8 and row["efficiency_range"] == (0.7, 0.9) and row["doctor"] == "VERDICT"
    assert read[0].pipeline_efficiency == 0.8 and read[0].efficiency_range == (0.7, 0.9)


def test_each_rungs_peak_device_memory_is_its_own(monkeypatch):
    """A rung's "peak GPU MiB" is what it holds (its data and model, made when it is built) plus the most its steps
    allocate beyond what was held when a block started: not the process's maximum, which the 224-px batch search
    and the other rungs set."""
    from torch import nn

    from helpers import measure
    from helpers.course import ladders
    from helpers.course.ladders import Rung
    from tests.test_measure import SimulatedAllocator

    memory = SimulatedAllocator(monkeypatch, measure, ladders)
    monkeypatch.setattr(ladders, "busy_cores", lambda: 0)
    memory.allocate(10**6)
    memory.allocate(-(10**6))  # the batch search's peak, freed

    def rung(name: str, held: int, transient: int) -> Rung:
        def build():
            memory.allocate(held)  # its data on the device, kept while the ladder runs
            return [(torch.zeros(4, 3), torch.zeros(4, 1))] * 4

        def make_step(model):
            def step(batch):
                memory.allocate(transient)
                memory.allocate(-transient)

            return step

        return Rung(name, build, lambda: nn.Linear(3, 1), workers=0, make_step=make_step, role=name)

    rows, _ = ladders.run_ladder(
        [rung("a", 4000, 300), rung("b", 1000, 800)], device=torch.device("cpu"), rounds=3, turn_s=0.01
    )
    assert [row["peak_device_mib"] * 2**20 for row in rows] == [4300, 1800]
