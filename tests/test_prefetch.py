"""PrefetchLoader: the batches it hands over equal the plain conversion, in order; on CUDA its calls come in the order
that makes the overlap safe (checked here on the CPU with recording stand-ins for the stream calls)."""

from __future__ import annotations

import contextlib

import pytest
import torch

from helpers import prefetch
from helpers.prefetch import PrefetchLoader

MEAN, STD = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)


def _batches(count: int = 5) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [
        (torch.randint(0, 256, (4, 3, 6, 6), dtype=torch.uint8, generator=generator), torch.arange(4) + 4 * i)
        for i in range(count)
    ]


def test_batches_equal_the_plain_conversion_in_order():
    batches = _batches()
    out = list(PrefetchLoader(batches, "cpu", mean=MEAN, std=STD, channels_last=True))
    assert len(out) == len(batches)
    mean, std = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    for (images, labels), (got_images, got_labels) in zip(batches, out):
        torch.testing.assert_close(got_images, (images.float() / 255 - mean) / std)
        assert got_images.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(got_labels, labels)  # labels are copied, not converted


def test_nested_batches_and_length():
    batches = [{"image": images, "meta": [labels, "name"]} for images, labels in _batches(3)]
    loader = PrefetchLoader(batches, "cpu")
    assert len(loader) == 3
    first = next(iter(loader))
    assert first["image"].dtype == torch.float32 and first["image"].max() <= 1
    assert first["meta"][1] == "name" and first["meta"][0].dtype == torch.int64
    with pytest.raises(ValueError, match="both mean and std"):
        PrefetchLoader(batches, "cpu", mean=MEAN)


def test_cuda_path_prepares_the_next_batch_before_handing_over_and_waits_for_it(monkeypatch):
    """The calls that make the side stream safe, in order: batch k+1 is queued on the side stream before batch k is
    handed over; a batch is handed over only after the current stream waited on the side stream and every one of its
    tensors was marked as used by the current stream."""
    events: list[tuple] = []

    class SideStream:
        def __init__(self, device=None):
            pass

    @contextlib.contextmanager
    def on_stream(stream):
        events.append(("enter side",))
        yield
        events.append(("leave side",))

    class Current:
        def wait_stream(self, stream):
            events.append(("wait",))

    monkeypatch.setattr(torch.cuda, "Stream", SideStream)
    monkeypatch.setattr(torch.cuda, "stream", on_stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Current())
    monkeypatch.setattr(torch.Tensor, "record_stream", lambda self, stream: events.append(("record", id(self))))
    loader = PrefetchLoader(_batches(3), "cpu")
    loader.side_stream = SideStream()  # take the CUDA path with CPU tensors
    for images, labels in loader:
        events.append(("consume", id(images), id(labels)))
    consumed = [e for e in events if e[0] == "consume"]
    assert len(consumed) == 3
    for k, (_, images_id, labels_id) in enumerate(consumed):
        at = events.index(consumed[k])
        before = events[:at]
        last_wait = max(i for i, e in enumerate(before) if e == ("wait",))
        assert ("record", images_id) in before[last_wait:] and ("record", labels_id) in before[last_wait:]
        entered = [i for i, e in enumerate(before) if e == ("enter side",)]
        assert len(entered) == min(k + 2, 3), "the next batch is queued on the side stream before this one is used"
        assert ("enter side",) not in before[last_wait:][:1]


def test_prefetch_is_torch_only():
    source = open(prefetch.__file__).read()
    assert "import torch" in source and "from ." not in source
