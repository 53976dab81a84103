"""pipeline_facts reads what a pipeline already is off its objects: a batch's inputs and targets (dtype, device,
shape) in any of the shapes a loader yields, a DataLoader's knobs (also behind a wrapper), the task from the pieces'
names or else from the batch, a TrainStep's precision, and the dataset's size as uint8 inputs."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers.pipeline_facts import PipelineFacts, describe_batch, describe_pipeline
from helpers.step import TrainStep

CPU = torch.device("cpu")


def _images(count: int = 8) -> TensorDataset:
    return TensorDataset(torch.zeros(count, 3, 4, 5, dtype=torch.uint8), torch.zeros(count, dtype=torch.int64))


def test_a_batch_is_read_from_a_tuple_a_dict_or_a_lone_tensor():
    images, labels = torch.zeros(2, 3, 4, 5, dtype=torch.uint8), torch.zeros(2, dtype=torch.int64)
    both = {"inputs": ("torch.uint8", "cpu", (2, 3, 4, 5)), "targets": ("torch.int64", "cpu", (2,))}
    assert describe_batch((images, labels)) == describe_batch([images, labels]) == both
    assert describe_batch({"image": images, "label": labels}) == both  # in the dict's order
    assert describe_batch(images) == {"inputs": both["inputs"]}
    assert describe_batch(("not a tensor", labels)) == {"targets": both["targets"]}
    assert describe_batch(None) == {}


def test_a_dataloaders_knobs_are_read_also_behind_a_wrapper():
    loader = DataLoader(_images(), batch_size=4, num_workers=2, pin_memory=True, persistent_workers=True)
    facts = describe_pipeline(loader, None, CPU, cpu_cores=4)
    assert (facts.loader, facts.dataset) == ("DataLoader", "TensorDataset")
    assert (facts.num_workers, facts.pin_memory, facts.persistent_workers, facts.prefetch_factor) == (2, True, True, 2)
    wrapped = describe_pipeline(types.SimpleNamespace(loader=loader), None, CPU, cpu_cores=4)
    assert wrapped.loader == "SimpleNamespace" and wrapped.dataset == "TensorDataset" and wrapped.num_workers == 2
    plain = describe_pipeline(DataLoader(_images(), batch_size=4), None, CPU, cpu_cores=4)
    assert plain.num_workers == 0 and plain.prefetch_factor is None  # no workers: nothing is prefetched
    assert describe_pipeline([1, 2], None, CPU, cpu_cores=4).num_workers is None  # not a DataLoader: no knobs


@pytest.mark.parametrize(
    ("targets", "task"),
    [
        (torch.zeros(2, dtype=torch.int64), "classification"),  # one integer label per sample
        (torch.zeros(2, 3, 8, 10), "super-resolution"),  # an image in, an image out
        (torch.zeros(2, 5, dtype=torch.int64), "unknown"),  # integers, but not one label per sample
    ],
)
def test_the_task_is_read_off_the_batch_when_no_piece_names_it(targets, task):
    batch = describe_batch((torch.zeros(2, 3, 4, 5), targets))
    assert describe_pipeline([], None, CPU, batch, cpu_cores=2).task == task


def test_a_pieces_name_decides_the_task_before_any_batch():
    loader = DataLoader(_images(), batch_size=4)
    assert describe_pipeline(loader, None, CPU, cpu_cores=2).task == "unknown"  # a TensorDataset says nothing
    named = type("LazyCropSRDataset", (TensorDataset,), {})(*_images().tensors)
    assert describe_pipeline(DataLoader(named, batch_size=4), None, CPU, cpu_cores=2).task == "super-resolution"
    facts = describe_pipeline(DataLoader(named, batch_size=4), None, CPU, describe_batch(next(iter(loader))))
    assert facts.task == "super-resolution"  # the name wins over integer labels in the batch


def test_the_precision_is_a_train_steps_and_unknown_for_a_plain_function():
    model = nn.Linear(3, 2)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), device="cpu", channels_last=True)
    facts = describe_pipeline([], step, CPU, cpu_cores=2)
    assert (facts.precision, facts.channels_last) == ("fp32", True)
    bound = describe_pipeline([], step.__call__, CPU, cpu_cores=2)  # a bound method: read off its object
    assert bound.precision == "fp32"
    plain = describe_pipeline([], lambda batch: None, CPU, cpu_cores=2)
    assert (plain.precision, plain.channels_last) == (None, None)


def test_the_dataset_size_is_its_length_times_one_samples_inputs():
    loader = DataLoader(_images(count=10), batch_size=4)
    batch = describe_batch(next(iter(loader)))
    assert describe_pipeline(loader, None, CPU, batch, cpu_cores=2).dataset_bytes == 10 * 3 * 4 * 5
    assert describe_pipeline(loader, None, CPU, cpu_cores=2).dataset_bytes is None  # no batch seen: no sample shape
    held = types.SimpleNamespace(images=torch.zeros(7, 3, 2, 2, dtype=torch.uint8))
    assert describe_pipeline(held, None, CPU, cpu_cores=2).dataset_bytes == 7 * 3 * 2 * 2  # the tensor it holds


def test_decoded_pipelines_and_the_summary_line():
    assert PipelineFacts(loader="DataLoader", dataset="TensorDataset").decoded
    assert PipelineFacts(loader="DeviceTensorLoader").decoded
    assert not PipelineFacts(loader="DataLoader", dataset="ImageFolder").decoded
    facts = PipelineFacts(loader="DataLoader", dataset="ImageFolder", num_workers=1, pin_memory=False)
    facts.inputs_dtype, facts.inputs_device, facts.precision = "torch.uint8", "cpu", "bf16"
    facts.task, facts.intra_op_threads, facts.cpu_cores = "classification", 1, 2
    assert facts.summary() == (
        "DataLoader over ImageFolder; 1 worker, pin_memory=False, persistent_workers=None, prefetch_factor=None; "
        "inputs uint8 on cpu; task: classification; step on cpu, bf16; 1 intra-op thread, 2 cores"
    )
