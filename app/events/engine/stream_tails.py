"""One read of a stream (the events table, or a run's history) per stream and wake-up,
shared by all of that stream's readers in this process.

Each open stream keeps a tail: the latest events of the stream, at most `capacity` of them,
in order. After a wake-up a reader asks for a refresh; the refresh reads what was committed
after the tail's end, once, for every reader waiting. A reader waits for a refresh that
started after it asked: one already running may have begun before the commit that woke it.
A reader that needs events older than the tail holds (a replay after `Last-Event-ID`, or a
reader that fell behind) reads the table itself, a bounded batch at a time.

The tail holds each event as the bytes sent to a client, made once for all readers.

Sequence numbers become visible in order and without gaps, so reading after the highest
number already read keeps the tail contiguous. A failed read is logged and leaves the tail
as it was; the readers try again on their next wake-up or poll.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

log = logging.getLogger(__name__)


class Encoded(NamedTuple):
    seq: int  # the event's sequence number
    sse: bytes  # the event as sent
    # A run's lifecycle event: whether it left the run settled (its stream may end there);
    # None for any other event.
    settles_run: bool | None


# A stream's events after a sequence number, at most `limit` of them, as sent; and the
# stream's last sequence number. (A run's stream is its history: one item per step.)
Read = Callable[[AsyncSession, str, int, int], Awaitable[list[Encoded]]]
End = Callable[[AsyncSession, str], Awaitable[int]]


class StreamTail:
    def __init__(
        self,
        stream: str,
        sessionmaker: async_sessionmaker[AsyncSession],
        capacity: int,
        read: Read,
        end: End,
    ) -> None:
        self.stream = stream
        self._sessionmaker = sessionmaker
        self._capacity = capacity
        self._read_after = read
        self._end_of = end
        self._events: deque[Encoded] = deque(maxlen=capacity)
        self._end: int | None = None  # the highest sequence number read; None: not yet
        self._next: asyncio.Future[None] | None = None  # the refresh that starts next
        self._runner: asyncio.Task[None] | None = None
        self.readers = 0

    def after(self, seq: int, limit: int) -> list[Encoded] | None:
        """Up to `limit` events after `seq` from memory; None when the tail does not reach
        back to `seq + 1` (the caller reads the table)."""
        if self._end is None:
            return None
        if seq >= self._end:
            return []
        if not self._events or self._events[0][0] > seq + 1:
            return None
        start = seq + 1 - self._events[0][0]
        return list(itertools.islice(self._events, start, start + limit))

    async def refresh(self) -> None:
        """Returns once a read of the table that started after this call has ended."""
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        wanted = self._next
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run(), name=f"stream-tail:{self.stream}")
        # `wait` neither raises the read's outcome nor cancels it if this reader leaves.
        await asyncio.wait({wanted})

    def stop(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
        if self._next is not None and not self._next.done():
            self._next.cancel()

    async def _run(self) -> None:
        while self._next is not None:
            current, self._next = self._next, None
            try:
                full = await self._read()
            except (SQLAlchemyError, OSError) as exc:
                log.warning("stream %s cannot read events (%s); retrying", self.stream, exc)
                full = False
            finally:
                if not current.done():
                    current.set_result(None)
            if full and self._next is None:  # more may be waiting: read on
                self._next = asyncio.get_running_loop().create_future()

    async def _read(self) -> bool:
        """True when the read was a full batch."""
        async with self._sessionmaker() as session:
            if self._end is None:
                self._end = await self._end_of(session, self.stream)
                return False
            batch = await self._read_after(session, self.stream, self._end, self._capacity)
        self._events.extend(batch)
        if batch:
            self._end = batch[-1].seq
        return len(batch) == self._capacity


class StreamTails:
    """The tails of the streams open in this process; a tail lives while it has readers."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        capacity: int,
        read: Read,
        end: End,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._capacity = capacity
        self._read = read
        self._end = end
        self._tails: dict[str, StreamTail] = {}

    @contextmanager
    def reading(self, stream: str) -> Iterator[StreamTail]:
        tail = self._tails.get(stream)
        if tail is None:
            tail = self._tails[stream] = StreamTail(
                stream, self._sessionmaker, self._capacity, self._read, self._end
            )
        tail.readers += 1
        try:
            yield tail
        finally:
            tail.readers -= 1
            if tail.readers == 0:
                del self._tails[stream]
                tail.stop()
