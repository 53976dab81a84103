"""The doctor's wording and advice at their edges: an efficiency just above 1 is shown as 1.0 within the noise, a
step's own device is where batches go, and each advice line appears exactly where its condition holds."""

from __future__ import annotations

import torch

from helpers.doctor import efficiency_text, step_device
from helpers.pipeline_facts import PipelineFacts, advice_for


def test_an_efficiency_just_above_one_is_noise():
    assert efficiency_text(1.02, 0.98, 1.05).startswith("1.0 within the noise")
    assert efficiency_text(0.97, 0.95, 0.99) == "0.97 (0.95–0.99)"


def test_a_steps_own_device_is_where_batches_go():
    class Step:
        device = torch.device("meta")

        def __call__(self, batch):
            return batch

    assert step_device(Step()) == torch.device("meta")
    assert step_device(Step(), "cpu") == torch.device("cpu")


def _facts(**changes) -> PipelineFacts:
    base = dict(loader="DataLoader", num_workers=2, persistent_workers=True, cpu_cores=4, intra_op_threads=2)
    return PipelineFacts(**{**base, **changes})


def test_persistent_workers_are_advised_only_with_workers():
    assert any("persistent_workers" in line for line in advice_for("INPUT-BOUND", _facts(persistent_workers=False)))
    no_workers = _facts(num_workers=0, persistent_workers=False)
    assert not any("persistent_workers" in line for line in advice_for("INPUT-BOUND", no_workers))


def test_workers_plus_threads_equal_to_the_cores_share_them_and_more_exceed():
    (share,) = [line for line in advice_for("LOADER COMPETES WITH THE STEP", _facts()) if "intra-op" in line]
    assert "2 workers + 2 threads share 4 cores" in share and "torch.set_num_threads(2)" in share
    over = advice_for("LOADER COMPETES WITH THE STEP", _facts(intra_op_threads=3))
    assert any("2 workers + 3 threads exceed 4 cores" in line for line in over)


def test_the_whole_dataset_on_the_device_is_advised_only_within_half_the_free_memory():
    facts = dict(task="classification", dataset_bytes=600, inputs_dtype="torch.float32", inputs_device="cpu")
    fits = advice_for("INPUT-BOUND", _facts(free_device_bytes=1201, **facts))
    assert any("DeviceTensorLoader" in line for line in fits)
    too_big = advice_for("INPUT-BOUND", _facts(free_device_bytes=1000, **facts))
    assert not any("DeviceTensorLoader" in line for line in too_big)


def test_a_busy_machine_is_named_from_half_a_core():
    assert any(
        "other processes used 0.5 of 4 cores" in line for line in advice_for("COMPUTE-BOUND", _facts(), other_cores=0.5)
    )
    assert not any("other processes" in line for line in advice_for("COMPUTE-BOUND", _facts(), other_cores=0.4))


def test_pin_memory_is_advised_only_for_a_cuda_step_fed_from_the_cpu():
    facts = dict(pin_memory=False, inputs_device="cpu")
    assert any("pin_memory=True" in line for line in advice_for("INPUT-BOUND", _facts(device="cuda:0", **facts)))
    assert not any("pin_memory" in line for line in advice_for("INPUT-BOUND", _facts(device="cpu", **facts)))
