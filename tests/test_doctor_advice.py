"""The doctor's advice at its edges (its words for an efficiency above 1 are helpers.spread's: test_spread.py): a
step's own device is where batches go, each advice line appears exactly where its condition holds and names the lesson
that teaches it, and advice never contradicts the CPU budget that chose the workers and threads."""

from __future__ import annotations

import torch

from helpers.doctor import step_device
from helpers.doctor_advice import advice_for, notes_for
from helpers.loadmeter import cpu_budget
from helpers.pipeline_facts import PipelineFacts


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


COMPETES = "LOADER COMPETES WITH THE STEP"


def test_workers_plus_threads_within_the_cores_are_not_told_to_shrink_and_more_are():
    within = advice_for(COMPETES, _facts())
    assert "the CPU budget already holds (2 workers + 2 intra-op threads for 4 cores" in within[0]
    assert not any("fewer DataLoader workers" in line for line in within)
    over = advice_for(COMPETES, _facts(intra_op_threads=3))
    assert any("2 workers + 3 threads exceed 4 cores" in line and "torch.set_num_threads(2)" in line for line in over)


def test_the_cpu_budgets_own_choice_is_never_called_too_many():
    # issue 31: "fewer workers or threads: 1 + 1 share 2 cores" beside the budget that chose 1 + 1; with one of
    # the two cores busy elsewhere the budget still gives 1 + 1, so the advice is to make samples cheaper
    for other in (None, 0.0, 0.4, 1.0, 1.3):
        busy = round(other or 0.0)
        workers, threads = cpu_budget(1, 2, busy)
        facts = _facts(num_workers=workers, intra_op_threads=threads, cpu_cores=2, task="classification")
        advice = advice_for(COMPETES, facts, other_cores=other)
        assert not any("fewer DataLoader workers" in line for line in advice), (other, advice)
        assert "cpu_budget gives the same" in advice[0] and "make samples cheaper" in advice[0]
        assert "decode fewer pixels" in advice[1] and "lesson 07" in advice[1]
    busy = advice_for(COMPETES, _facts(num_workers=1, intra_op_threads=1, cpu_cores=2), other_cores=1.0)
    assert "other processes using 1.0 of them" in busy[0]


def test_each_bottleneck_names_its_fix_and_the_lesson_that_teaches_it():
    lessons = {
        "INPUT-BOUND": "lesson 02",
        COMPETES: "lesson 02: the CPU budget",
        "TRANSFER-BOUND": "lesson 04: overlap the copy",
        "COMPUTE-BOUND": "lesson 03",
    }
    facts = _facts(device="cuda:0", pin_memory=False, inputs_device="cpu", inputs_dtype="torch.float32", num_workers=1)
    for verdict, lesson in lessons.items():
        advice = advice_for(verdict, facts if verdict == "TRANSFER-BOUND" else _facts(num_workers=1, cpu_cores=4))
        assert advice and lesson in advice[0], (verdict, advice)
    transfer = "\n".join(advice_for("TRANSFER-BOUND", facts))
    assert "pin_memory=True" in transfer and "non_blocking=True" in transfer and "PrefetchLoader" in transfer
    pinned = "\n".join(advice_for("TRANSFER-BOUND", _pinned(facts)))
    assert "pin_memory=True" not in pinned


def _pinned(facts: PipelineFacts) -> PipelineFacts:
    return PipelineFacts(**{**facts.__dict__, "pin_memory": True})


def test_pin_memory_is_said_to_do_nothing_without_a_gpu():
    assert any("pin_memory=True does nothing without a GPU" in note for note in notes_for(_facts(pin_memory=True)))
    assert not notes_for(_facts(pin_memory=True, device="cuda:0"))
    assert not notes_for(_facts(pin_memory=False))


def test_a_prefetch_loader_on_cuda_says_how_its_overlap_is_measured():
    (note,) = notes_for(_facts(loader="PrefetchLoader", device="cuda:0"))
    assert "current stream only" in note and "not charged as data-wait" in note
    assert not notes_for(_facts(loader="PrefetchLoader", device="cpu"))


def test_the_whole_dataset_on_the_device_is_advised_only_within_half_the_free_memory():
    facts = dict(task="classification", dataset_bytes=600, inputs_dtype="torch.float32", inputs_device="cpu")
    fits = advice_for("INPUT-BOUND", _facts(free_device_bytes=1201, **facts))
    assert any("DeviceTensorLoader" in line for line in fits)
    too_big = advice_for("INPUT-BOUND", _facts(free_device_bytes=1000, **facts))
    assert not any("DeviceTensorLoader" in line for line in too_big)


def test_a_busy_machine_is_named_from_half_a_core():
    busy = advice_for("COMPUTE-BOUND", _facts(), other_cores=0.5)
    assert busy[-1] == "- rerun with the other processes stopped to confirm (the machine was busy)."
    assert not any("other processes" in line for line in advice_for("COMPUTE-BOUND", _facts(), other_cores=0.4))
    assert sum("cores" in line for line in busy) == sum(
        "cores" in line for line in advice_for("COMPUTE-BOUND", _facts())
    )


def test_pin_memory_is_advised_only_for_a_cuda_step_fed_from_the_cpu():
    facts = dict(pin_memory=False, inputs_device="cpu")
    assert any("pin_memory=True" in line for line in advice_for("INPUT-BOUND", _facts(device="cuda:0", **facts)))
    assert not any("pin_memory" in line for line in advice_for("INPUT-BOUND", _facts(device="cpu", **facts)))


def test_threads_beyond_the_cores_other_processes_left_are_fitted_to_the_budget():
    # the measured case: 1 worker + 2 intra-op threads on 2 cores while other processes used 1.7 of them
    facts = _facts(num_workers=1, intra_op_threads=2, cpu_cores=2)
    (line, *_) = advice_for(COMPETES, facts, other_cores=1.7)
    assert "1 worker + 2 threads exceed the cores other processes left free (they used 1.7 of 2)" in line
    assert "num_workers=1 and torch.set_num_threads(1)" in line and "lesson 02: the CPU budget" in line
    (line, *_) = advice_for(COMPETES, facts, other_cores=0.6)
    assert "exceed the 1 of 2 cores other processes left free (0.6 used)" in line


def test_a_folder_of_photographs_is_advised_the_store_not_its_crops_on_the_device():
    # an ImageFolder's 224-px crops would "fit" on the device, but the dataset is its photographs, cut anew each epoch
    folder = dict(task="classification", dataset_bytes=10 * 2**20, inputs_dtype="torch.float32", inputs_device="cpu")
    facts = _facts(dataset="ImageFolder", num_workers=1, intra_op_threads=1, cpu_cores=2, **folder)
    advice = "\n".join(advice_for(COMPETES, facts))
    assert "StoreCropDataset" in advice and "ReducedCropDataset" in advice and "lesson 07" in advice
    assert "DeviceTensorLoader" not in advice
    in_memory = "\n".join(advice_for("INPUT-BOUND", _facts(dataset="CIFAR10", **folder)))
    assert "DeviceTensorLoader" in in_memory  # a small in-memory set does go whole onto the device
