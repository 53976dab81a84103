"""Overlapping batch making and the host-to-device copy with the step: a prefetcher that copies the next batch, and
turns uint8 images into normalised float, on a side CUDA stream while the current step runs (the idea of timm's
PrefetchLoader), and a background thread that produces the next batches while the step runs.

Example:
    >>> batches = [(torch.full((2, 3, 4, 4), 255, dtype=torch.uint8), torch.tensor([0, 1]))] * 3
    >>> images, labels = next(iter(PrefetchLoader(batches, "cpu", mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))))
    >>> images.dtype, images.unique(), labels  # on CUDA, copied and normalised on a side stream
    (torch.float32, tensor([1.]), tensor([0, 1]))
    >>> list(BackgroundPrefetcher(range(5), depth=2))  # made in a thread, two ahead of the consumer
    [0, 1, 2, 3, 4]

Copy alone.

Needs: torch.

On CUDA the copy can only overlap when the host batch is in pinned (page-locked) memory: give the DataLoader
`pin_memory=True`, so its pinning thread pins each batch once, off the training loop. From pageable memory
`non_blocking=True` still copies, but the host waits for it. Off CUDA there is no side stream and no asynchronous copy:
the prefetcher then prepares each batch when it is asked for, so the same loop runs everywhere. `BackgroundPrefetcher`
needs only the standard library: it is worth it when making a batch is mostly torch work that releases the GIL.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch


def _prepare_images(
    images: torch.Tensor, mean: torch.Tensor | None, std: torch.Tensor | None, channels_last: bool
) -> torch.Tensor:
    """uint8 NCHW images on the device as float in [0, 1], normalised when mean and std are given."""
    images = images.float().div_(255)
    if mean is not None and std is not None:
        images = images.sub_(mean).div_(std)
    return images.contiguous(memory_format=torch.channels_last) if channels_last else images


class PrefetchLoader:
    """Iterate `loader`, each batch moved to `device` with its uint8 images (4-D tensors) made normalised float.

    On CUDA the next batch is copied and converted on a side stream while the consumer's step runs on the current
    stream; before a batch is handed over the current stream waits for the side stream (`wait_stream`), and each
    tensor is marked as used by the current stream (`record_stream`) so the caching allocator cannot give its memory
    back to the side stream while the step still reads it. A batch already on the GPU (made there by its loader, on
    the current stream) is not copied but still converted on the side stream: the side stream first waits for the
    current one, and its tensors are marked as used by the side stream, so neither reads them before they are made
    nor frees them while they are read. Batches may be tensors, or tuples, lists or dicts of them.
    """

    def __init__(
        self,
        loader: Iterable,
        device: torch.device | str,
        *,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        channels_last: bool = False,
    ) -> None:
        if (mean is None) != (std is None):
            raise ValueError("give both mean and std, or neither")
        self.loader, self.device, self.channels_last = loader, torch.device(device), channels_last
        shape = (1, -1, 1, 1)
        self.mean = None if mean is None else torch.tensor(mean, device=self.device).view(shape)
        self.std = None if std is None else torch.tensor(std, device=self.device).view(shape)
        self.side_stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        how = (
            "on a side stream, overlapping the step" if self.side_stream is not None else "when asked (no side stream)"
        )
        normalised = "normalised" if self.mean is not None else "in [0, 1], not normalised"
        layout = "channels_last" if self.channels_last else "contiguous"
        return (
            f"PrefetchLoader: the batches of {type(self.loader).__name__} moved to {self.device} {how}; uint8 images "
            f"made float32 {normalised}, {layout}"
        )

    def _prepare(self, batch: Any) -> Any:
        """The batch on the device: tensors copied (non-blocking), uint8 images converted."""
        if isinstance(batch, torch.Tensor):
            moved = batch.to(self.device, non_blocking=True)
            if moved.dtype == torch.uint8 and moved.dim() == 4:
                return _prepare_images(moved, self.mean, self.std, self.channels_last)
            return moved
        if isinstance(batch, dict):
            return {key: self._prepare(value) for key, value in batch.items()}
        if isinstance(batch, (list, tuple)):
            return type(batch)(self._prepare(value) for value in batch)
        return batch

    def _wait_for_resident(self, batch: Any) -> None:
        """Make the side stream wait for the current stream when `batch` holds tensors already on the GPU: they were
        made there by work queued on the current stream, which the side stream would otherwise not wait for."""
        resident = [tensor for tensor in _tensors(batch) if tensor.device.type == "cuda"]
        if not resident:
            return  # host tensors: the copy reads memory the host has finished writing
        self.side_stream.wait_stream(torch.cuda.current_stream(self.device))  # type: ignore[union-attr]
        for tensor in resident:
            tensor.record_stream(self.side_stream)  # type: ignore[arg-type]

    def _hand_over(self, batch: Any) -> Any:
        """Make the current stream wait for the side stream's work on `batch`, and mark its tensors as used there."""
        current = torch.cuda.current_stream(self.device)
        current.wait_stream(self.side_stream)  # type: ignore[arg-type]
        for tensor in _tensors(batch):
            tensor.record_stream(current)
        return batch

    def __iter__(self) -> Iterator[Any]:
        if self.side_stream is None:
            for batch in self.loader:
                yield self._prepare(batch)
            return
        ready = None
        for batch in self.loader:
            self._wait_for_resident(batch)
            with torch.cuda.stream(self.side_stream):
                upcoming = self._prepare(batch)  # queued on the side stream; the step below runs meanwhile
            if ready is not None:
                yield ready
            ready = self._hand_over(upcoming)
        if ready is not None:
            yield ready


def _tensors(batch: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a (nested) batch."""
    if isinstance(batch, torch.Tensor):
        yield batch
    elif isinstance(batch, dict):
        for value in batch.values():
            yield from _tensors(value)
    elif isinstance(batch, (list, tuple)):
        for value in batch:
            yield from _tensors(value)


class BackgroundPrefetcher:
    """Iterate `iterable` in a background thread, `depth` items ahead, so producing the next batch overlaps the step.

    Worth it when producing a batch is mostly torch work that releases the GIL (gathers, copies, pinning), as in
    a decoded-cache loader; the thread stops when the consumer stops, and re-raises the producer's errors.
    """

    _DONE = object()

    def __init__(self, iterable: Iterable, depth: int = 2) -> None:
        self.iterable, self.depth = iterable, depth

    def __len__(self) -> int:
        return len(self.iterable)  # type: ignore[arg-type]

    @property
    def batches_ahead(self) -> int:
        """Items ready before they are asked for: `depth` in the queue and one in the thread's hand."""
        return self.depth + 1

    def __repr__(self) -> str:
        return f"BackgroundPrefetcher: the items of {type(self.iterable).__name__} as they are, {self.depth} ahead in a thread"

    def __iter__(self) -> Iterator[Any]:
        items: queue.Queue = queue.Queue(maxsize=self.depth)
        stop = threading.Event()

        def offer(item: Any) -> bool:
            while not stop.is_set():
                try:
                    items.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            try:
                for item in self.iterable:
                    if not offer(item):
                        return
                offer(self._DONE)
            except BaseException as error:  # noqa: BLE001 (handed to the consumer, which re-raises it)
                offer(error)

        thread = threading.Thread(target=produce, name="prefetch", daemon=True)
        thread.start()
        try:
            while True:
                item = items.get()
                if item is self._DONE:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            thread.join(timeout=5)
