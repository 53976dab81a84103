"""measure_pipeline on fake CUDA, as a user calls it: a host loader feeding a step whose model was moved to the
GPU. Every batch reaches the step on the device, the blocks (fed, then pre-made with the workers stopped) read no
device value, and the host waits are the documented ones: the synchronisations that close each timed step and
block, and the copies of pageable host batches."""

from __future__ import annotations

import torch
from torch import nn

from helpers import measure
from helpers.measure import measure_pipeline


def test_measure_pipeline_on_cuda_moves_every_batch_and_reads_no_device_value(fake_cuda, monkeypatch):
    # CUDA's allocator counters need a driver: the blocks' memory readings stand in as zero
    monkeypatch.setattr(measure, "allocated_device_memory_bytes", lambda device: 0)
    monkeypatch.setattr(measure, "peak_device_memory_bytes", lambda device: 0)
    monkeypatch.setattr(measure, "reset_peak_device_memory", lambda device=None: None)
    torch.manual_seed(0)
    model = nn.Linear(3, 1)  # built on the CPU, moved below as a user moves it
    batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(4)]
    seen = []
    with fake_cuda() as traffic:
        model.to("cuda")
        moved = len(traffic.waits)  # the model's own copy, the user's

        def step(batch):
            inputs, targets = batch
            seen.append((inputs.device.type, targets.device.type))
            nn.functional.mse_loss(model(inputs), targets).backward()

        result = measure_pipeline(batches, step, torch.device("cuda"), steps_per_block=2, blocks=2)
    assert result.steps == 4 and result.data_wait_ms > 0 and result.compute_ms > 0
    assert set(seen) == {("cuda", "cuda")}  # warm-up, fed and pre-made steps alike
    kinds = {(w.kind, w.where.split(":")[0]) for w in traffic.waits[moved:]}
    assert kinds <= {("synchronize", "helpers/measure.py"), ("host-to-device copy", "helpers/measure.py")}
    assert ("synchronize", "helpers/measure.py") in kinds
