"""The fake-CUDA tier's fixture: `fake_cuda()` is a context manager (tests/fake_cuda/harness.py says what it fakes and
what it cannot), undone with the test's monkeypatch."""

from __future__ import annotations

import functools

import pytest

from .harness import fake_cuda as _fake_cuda


@pytest.fixture
def fake_cuda(monkeypatch):
    """`with fake_cuda() as traffic:` runs its block with fake `cuda:0` tensors and records every host wait."""
    return functools.partial(_fake_cuda, monkeypatch)
