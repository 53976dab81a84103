"""A background thread that produces the next batches while the step runs, for loaders whose batch making is mostly
torch work that releases the GIL.

Copy alone: needs only the standard library.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any


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
