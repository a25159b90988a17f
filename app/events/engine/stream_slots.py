"""How many event streams a process serves at once.

A stream takes a slot before it sends anything and gives it back when its response ends,
however it ends (finished, client gone, send timed out, shutdown). Taking and giving back
never await, so on one event loop the count is exact without a lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from app.core.errors import TooManyStreams


class StreamSlots:
    def __init__(self, limit: int, retry_after_s: int) -> None:
        self.limit = limit
        self.retry_after_s = retry_after_s
        self._open = 0

    @property
    def open(self) -> int:
        return self._open

    @contextmanager
    def hold(self) -> Iterator[None]:
        """One slot for the body of the `with`; refuses with `TooManyStreams` when full."""
        if self._open >= self.limit:
            raise TooManyStreams(self.limit, self.retry_after_s)
        self._open += 1
        try:
            yield
        finally:
            self._open -= 1
