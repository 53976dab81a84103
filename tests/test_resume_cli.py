"""Restoration: every RNG (torch CPU, CUDA where present, NumPy with its cached Gaussian, Python's `random` with its
own, the loader's generator) goes through a checkpoint file and comes back exactly, and a run of the training command
line interrupted mid-run (Ctrl-C) and continued with `--resume` ends with the parameters of an uninterrupted run."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from torch import nn

from helpers import precision as precision_module
from helpers import step as step_module
from helpers.checkpoint import load_checkpoint, rng_states, set_rng_states
from helpers.course import recipe_run
from helpers.course.recipe_run import main
from helpers.loading import DeviceTensorLoader
from helpers.step import TrainStep
from helpers.trainer import CHECKPOINT_NAME, TrainState, restore, save_training_state


def _draws(generator: torch.Generator) -> tuple:
    """One draw from every stream a run reads; the Gaussian ones first use any value the library cached."""
    drawn = (
        torch.rand(3).tolist(),
        np.random.randn(),
        np.random.rand(),
        random.gauss(0, 1),
        random.random(),
        torch.rand(3, generator=generator).tolist(),
    )
    if torch.cuda.is_available():
        drawn += (torch.rand(3, device="cuda").tolist(),)
    return drawn


def test_every_rng_round_trips_through_a_checkpoint_file(tmp_path):
    torch.manual_seed(1)
    np.random.seed(2)
    random.seed(3)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(4)
    np.random.randn(), random.gauss(0, 1)  # leave a cached second Gaussian in NumPy and in `random`
    images, labels = torch.zeros(8, 3, 4, 4, dtype=torch.uint8), torch.zeros(8, dtype=torch.long)
    loader = DeviceTensorLoader(images, labels, batch_size=4, seed=5)
    torch.rand(7, generator=loader.generator)  # a generator part-way through its stream
    model = nn.Linear(2, 2)
    train_step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), device="cpu")
    state = TrainState(loader_generator=loader.generator.get_state())
    save_training_state(tmp_path, state, model=model, step=train_step)
    expected = _draws(loader.generator)

    _draws(loader.generator)  # move every stream on, then restore them from the file alone
    torch.manual_seed(99)
    np.random.seed(99)
    random.seed(99)
    restored, saved_rng = restore(tmp_path, model=model, step=train_step, loader=loader)
    set_rng_states(saved_rng)
    assert _draws(loader.generator) == expected
    assert restored.loader_generator is not None


def test_rng_states_survive_weights_only_loading(tmp_path):
    torch.manual_seed(0)
    np.random.randn(), random.gauss(0, 1)
    torch.save({"rng": rng_states()}, tmp_path / "r.pt")
    expected = (torch.rand(2).tolist(), np.random.randn(), random.gauss(0, 1))
    set_rng_states(load_checkpoint(tmp_path / "r.pt", required=("rng",))["rng"])
    assert (torch.rand(2).tolist(), np.random.randn(), random.gauss(0, 1)) == expected


def _parameters(folder) -> dict[str, torch.Tensor]:
    return load_checkpoint(folder / CHECKPOINT_NAME)["model"]


@pytest.mark.parametrize(("task", "interrupt_at"), [("sr", 3), ("cifar", 2)])
def test_the_cli_resumed_mid_run_equals_an_uninterrupted_run(tmp_path, monkeypatch, capsys, task, interrupt_at):
    # smoke profile: SR is 2 epochs of 2 steps (interrupted in the second epoch), CIFAR 1 epoch of 4 (in its middle)
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    # the precision is chosen by timing, which a loaded machine can flip between runs: fix it to fp32 here
    monkeypatch.setattr(step_module, "native_precisions", lambda device: ["fp32"])
    monkeypatch.setattr(precision_module, "native_precisions", lambda device: ["fp32"])  # imported there by name
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert main([task, "--profile", "smoke", "--checkpoint-dir", str(whole)]) == 0

    calls = {"n": 0, "training": False}
    original, run = TrainStep.__call__, recipe_run.run_recipe

    def interrupted(self, *args, **kwargs):
        # only the training's steps count: the recipe's calibration before it takes a number of steps that
        # depends on how fast the machine is
        calls["n"] += calls["training"]
        if calls["n"] == interrupt_at + 1:
            raise KeyboardInterrupt  # Ctrl-C while the step after `interrupt_at` completed steps runs
        return original(self, *args, **kwargs)

    def training(*args, **kwargs):
        calls["training"] = True
        try:
            return run(*args, **kwargs)
        finally:
            calls["training"] = False

    monkeypatch.setattr(TrainStep, "__call__", interrupted)
    monkeypatch.setattr(recipe_run, "run_recipe", training)
    assert main([task, "--profile", "smoke", "--checkpoint-dir", str(parts)]) == 130
    saved = load_checkpoint(parts / CHECKPOINT_NAME)
    assert saved["step"]["micro_batches"] == interrupt_at  # it really stopped mid-run
    monkeypatch.setattr(TrainStep, "__call__", original)
    monkeypatch.setattr(recipe_run, "run_recipe", run)
    assert main([task, "--profile", "smoke", "--checkpoint-dir", str(parts), "--resume"]) == 0

    expected, got = _parameters(whole), _parameters(parts)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), f"{task}: {name} differs after the resume"
    whole_history = json.loads((whole / "history.json").read_text())
    parts_history = json.loads((parts / "history.json").read_text())
    # train_loss is left out: after a mid-epoch resume the record averages only the batches trained after the
    # resume (the interrupted part's losses are not in the checkpoint), a known gap reported with issue 22
    drop = ("trained_seconds", "train_loss")
    assert [{k: v for k, v in r.items() if k not in drop} for r in parts_history] == [
        {k: v for k, v in r.items() if k not in drop} for r in whole_history
    ]
    assert "smoke run" in capsys.readouterr().out
