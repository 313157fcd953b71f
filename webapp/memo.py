"""A bounded, thread-safe memo kept in each process's memory."""

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class LruMemo(Generic[V]):
    """Values by key, at most `size`, the least recently used dropped first. The list rows
    of the pages and of the API use it keyed by every value a row shows, so an entry is
    never stale: a change makes a new key."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self._size:
                self._items.popitem(last=False)
