"""The doctor on CUDA: batches go to the step's GPU, the advice reads pin_memory and where the batch is made, and a
PrefetchLoader's side-stream copy that the step hides is not charged as data-wait."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers.diagnosis import copy_ms
from helpers.doctor import diagnose, step_device
from helpers.doctor_advice import advice_for
from helpers.loading import DeviceTensorLoader, make_loader
from helpers.measure import PipelineProbe
from helpers.prefetch import PrefetchLoader
from helpers.step import TrainStep

pytestmark = pytest.mark.cuda


def _step(device):
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10)).to(device)
    return TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), device=device)


def test_the_doctor_feeds_the_steps_gpu_and_reads_pin_memory(cuda):
    images, labels = torch.rand(64, 3, 8, 8), torch.randint(0, 10, (64,))
    step = _step(cuda)
    assert step_device(step) == cuda
    unpinned = diagnose(make_loader(TensorDataset(images, labels), 8), step, budget_s=0.3)
    assert unpinned.pipeline.device.startswith("cuda") and unpinned.trained_steps > 0
    assert "pin_memory=True" in "\n".join(advice_for("INPUT-BOUND", unpinned.pipeline))
    pinned = diagnose(make_loader(TensorDataset(images, labels), 8, pin_memory=True), step, budget_s=0.3)
    assert pinned.pipeline.pin_memory and "pin_memory=True" not in "\n".join(advice_for("INPUT-BOUND", pinned.pipeline))


def test_an_on_device_loader_is_not_told_to_move_to_the_device(cuda):
    images = torch.randint(0, 256, (64, 3, 8, 8), dtype=torch.uint8)
    loader = DeviceTensorLoader(images, torch.randint(0, 10, (64,)), batch_size=8, device=cuda)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10)).to(cuda)

    def train_step(batch):  # uint8 on the device, made float here
        inputs, targets = batch
        nn.functional.cross_entropy(model(inputs.float() / 255), targets).backward()

    diagnosis = diagnose(loader, train_step, budget_s=0.3)
    assert diagnosis.pipeline.device.startswith("cuda") and diagnosis.pipeline.inputs_device.startswith("cuda")
    for verdict in ("INPUT-BOUND", "LOADER COMPETES WITH THE STEP", "COMPUTE-BOUND"):
        text = "\n".join(advice_for(verdict, diagnosis.pipeline))
        assert "DeviceTensorLoader" not in text and "pin_memory" not in text and "uint8 batches" not in text


def test_a_prefetch_loaders_hidden_copy_is_not_charged_as_data_wait(cuda):
    # batches already made and pinned: fetching costs nothing, so a fed step's wait is the copy the step did not hide
    host = [torch.randint(0, 256, (64, 3, 512, 512), dtype=torch.uint8).pin_memory() for _ in range(4)]
    copy = copy_ms(host[0], cuda)
    weights = torch.randn(4096, 4096, device=cuda)

    def step(batch):  # longer than the copy, so the next batch's copy fits behind it
        for _ in range(8):
            weights.matmul(weights)

    class Endless:
        def __iter__(self):
            while True:
                yield from host

    probe = PipelineProbe(PrefetchLoader(Endless(), cuda), step, cuda, premade=1, warmup=2)
    probe.fed_block(8)
    waits_ms = sorted(1000 * w for w in probe.waits[-1])
    assert copy is not None and waits_ms[len(waits_ms) // 2] < 0.5 * copy, (waits_ms, copy)
