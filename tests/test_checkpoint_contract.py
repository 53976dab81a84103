"""Checkpoint details beyond the crash tests: loading refuses pickled code (weights_only), a setting only this run
has is a difference too, and checking saved RNG states leaves the current ones untouched."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
import torch

from helpers.checkpoint import (
    TRAINER_KEYS,
    CheckpointError,
    check_run_config,
    load_checkpoint,
    rng_states,
    validate_rng_states,
)


def test_a_checkpoint_holding_pickled_objects_is_refused(tmp_path):
    path = tmp_path / "last.pt"
    torch.save({**{key: 0 for key in TRAINER_KEYS}, "run": Fraction(1, 3)}, path)  # not a weights-only type
    with pytest.raises(CheckpointError, match="cannot read"):
        load_checkpoint(path)


def test_a_setting_only_this_run_has_is_named():
    with pytest.raises(CheckpointError, match="crop: saved None, this run 96"):
        check_run_config({"precision": "fp32"}, {"precision": "fp32", "crop": 96}, path="last.pt")


def test_validating_saved_rng_states_leaves_the_current_ones_as_they_were():
    torch.manual_seed(1)
    np.random.seed(1)
    random.seed(1)
    saved = rng_states()
    torch.manual_seed(2)
    np.random.seed(2)
    random.seed(2)
    expected = rng_states()
    draws = (float(torch.rand(())), float(np.random.rand()), random.random())
    from helpers.checkpoint import set_rng_states

    set_rng_states(expected)
    validate_rng_states(saved, path="last.pt")
    assert (float(torch.rand(())), float(np.random.rand()), random.random()) == draws


def test_the_cuda_generators_are_captured_where_cuda_is_available(monkeypatch):
    states = [torch.tensor([1, 2], dtype=torch.uint8)]  # stands in for each GPU's generator state
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: states)
    assert rng_states()["cuda"] is states
