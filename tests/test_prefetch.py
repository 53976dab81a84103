"""PrefetchLoader: the batches it hands over equal the plain conversion, in order, on the target device; on CUDA its
calls come in the order, and with the arguments, that make the overlap safe (checked here on the CPU with recording
stand-ins for the stream calls). BackgroundPrefetcher: every item in order, at most `depth` ahead, the producer's
error re-raised, its thread stopped with the consumer."""

from __future__ import annotations

import contextlib
import threading
import time

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


def test_only_uint8_image_batches_are_converted_and_nchw_stays_the_default():
    images, labels = _batches(1)[0]
    masks = torch.randint(0, 3, (4, 6, 6), dtype=torch.uint8)  # uint8 but 3-D: a label map, not images
    features = torch.rand(4, 3, 6, 6)  # 4-D but already float
    (out_images, out_masks, out_features) = next(iter(PrefetchLoader([(images, masks, features)], "cpu")))
    torch.testing.assert_close(out_images, images.float() / 255)
    assert out_images.is_contiguous() and not out_images.is_contiguous(memory_format=torch.channels_last)
    assert out_masks.dtype == torch.uint8 and torch.equal(out_masks, masks)
    assert torch.equal(out_features, features)


def test_batches_and_normalisation_constants_live_on_the_target_device():
    """The meta device stands in for a GPU on a CPU-only machine: every tensor must land there."""
    loader = PrefetchLoader(_batches(2), "meta", mean=MEAN, std=STD)
    assert loader.mean.device.type == "meta" and loader.std.device.type == "meta"
    for images, labels in loader:
        assert images.device.type == "meta" and labels.device.type == "meta" and images.dtype == torch.float32


def test_a_cuda_device_gets_a_side_stream_on_that_device(monkeypatch):
    made = []
    monkeypatch.setattr(torch.cuda, "Stream", lambda device=None: made.append(device) or "side stream")
    loader = PrefetchLoader(_batches(1), "cuda:1")
    assert loader.side_stream == "side stream" and made == [torch.device("cuda:1")]
    assert PrefetchLoader(_batches(1), "cpu").side_stream is None and len(made) == 1


def test_cuda_path_copies_without_blocking_on_the_side_stream_and_records_every_nested_tensor(monkeypatch):
    """The arguments of the stream calls: the copy is queued on the loader's side stream with non_blocking=True; the
    current stream of the loader's device waits on that side stream; every tensor, however deeply nested, is marked
    as used by the current stream."""
    calls: list[tuple] = []
    side = object()

    class Current:
        def wait_stream(self, stream):
            calls.append(("wait", stream))

    the_current = Current()

    @contextlib.contextmanager
    def on_stream(stream):
        calls.append(("stream", stream))
        yield

    real_to = torch.Tensor.to

    def recording_to(self, *args, **kwargs):
        calls.append(("to", kwargs.get("non_blocking")))
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.cuda, "stream", on_stream)
    monkeypatch.setattr(
        torch.cuda, "current_stream", lambda device=None: calls.append(("current", device)) or the_current
    )
    monkeypatch.setattr(torch.Tensor, "to", recording_to)
    monkeypatch.setattr(torch.Tensor, "record_stream", lambda self, stream: calls.append(("record", id(self), stream)))
    images, labels = _batches(1)[0]
    loader = PrefetchLoader([{"image": images, "extra": [labels, {"deep": labels + 1}]}], "cpu")
    loader.side_stream = side
    (batch,) = list(loader)
    assert ("stream", side) in calls and all(c[1] is side for c in calls if c[0] == "stream")
    assert [c for c in calls if c[0] == "wait"] == [("wait", side)]
    assert [c for c in calls if c[0] == "current"] == [("current", torch.device("cpu"))]
    assert [c[1] for c in calls if c[0] == "to"] == [True, True, True]
    recorded = {c[1]: c[2] for c in calls if c[0] == "record"}
    tensors = [batch["image"], batch["extra"][0], batch["extra"][1]["deep"]]
    assert set(recorded) == {id(t) for t in tensors} and all(s is the_current for s in recorded.values())


# --- BackgroundPrefetcher --------------------------------------------------------------------------------------


def test_background_prefetcher_yields_every_item_in_order_and_has_the_length():
    items = list(range(50))
    assert list(prefetch.BackgroundPrefetcher(items, depth=3)) == items
    assert len(prefetch.BackgroundPrefetcher(items)) == 50
    assert list(prefetch.BackgroundPrefetcher([])) == []


def test_background_prefetcher_runs_at_most_depth_ahead():
    produced: list[int] = []

    def source():
        for i in range(20):
            produced.append(i)
            yield i

    iterator = iter(prefetch.BackgroundPrefetcher(source(), depth=2))
    assert next(iterator) == 0
    time.sleep(0.3)  # let the thread run as far ahead as it may
    # item 0 consumed, 2 waiting in the queue, and 1 more made and waiting to be put
    assert len(produced) <= 1 + 2 + 1, produced
    assert list(iterator) == list(range(1, 20))


def test_background_prefetcher_reraises_the_producers_error_after_the_items_before_it():
    def source():
        yield 1
        yield 2
        raise OSError("disk gone")

    seen = []
    with pytest.raises(OSError, match="disk gone"):
        for item in prefetch.BackgroundPrefetcher(source()):
            seen.append(item)
    assert seen == [1, 2]


def test_background_prefetcher_stops_its_thread_when_the_consumer_stops():
    produced: list[int] = []

    def endless():
        while True:
            produced.append(len(produced))
            yield produced[-1]

    before = set(threading.enumerate())
    iterator = iter(prefetch.BackgroundPrefetcher(endless(), depth=2))
    assert [next(iterator) for _ in range(5)] == [0, 1, 2, 3, 4]
    deadline = time.monotonic() + 30
    while len(produced) < 5 + 2 + 1 and time.monotonic() < deadline:  # 2 queued and 1 waiting for room
        time.sleep(0.01)
    started = [t for t in threading.enumerate() if t not in before]
    iterator.close()  # what a `break` out of the loop does: the producer, blocked on the full queue, must stop too
    assert [t.name for t in started] == ["prefetch"] and started[0].daemon  # a daemon: never holds the interpreter
    assert not started[0].is_alive()
