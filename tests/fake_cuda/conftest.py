"""The fake-CUDA tier's fixture: `fake_cuda()` is a context manager (tests/fake_cuda/harness.py says what it fakes and
what it cannot), undone with the test's monkeypatch.

The tier needs a torch whose fake CUDA tensors never reach the driver. torch 2.6 (the lower-bounds stack) does:
`Tensor.to("cuda")` asks the driver for the current device, and slicing a fake CUDA tensor opens a device guard
("CUDA driver version is insufficient"), so there the tier is skipped, with that reason. Seen working: torch 2.11
(the Colab and GPU-runner stacks) and 2.14; from 2.11 on, a failing probe is an error, never a skip.
"""

from __future__ import annotations

import functools

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.torch_version import TorchVersion

from .harness import fake_cuda as _fake_cuda

SEEN_WORKING = "2.11"


def driver_free_reason() -> str | None:
    """None where fake CUDA tensors work without a driver; else why not (this torch calls the driver for them)."""
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            batch = torch.arange(8).to("cuda")
            batch[2:6][:, None].float().sum()
    except RuntimeError as error:
        if TorchVersion(torch.__version__) >= SEEN_WORKING or "driver" not in str(error).lower():
            raise
        first = str(error).splitlines()[0]
        return f"torch {torch.__version__} calls the CUDA driver for fake CUDA tensors ({first}); the fake-CUDA tier needs torch >= {SEEN_WORKING}"
    return None


REASON = driver_free_reason()


@pytest.fixture(autouse=True)
def _driver_free_fake_cuda() -> None:
    if REASON is not None:
        pytest.skip(REASON)


@pytest.fixture
def fake_cuda(monkeypatch):
    """`with fake_cuda() as traffic:` runs its block with fake `cuda:0` tensors and records every host wait."""
    return functools.partial(_fake_cuda, monkeypatch)
