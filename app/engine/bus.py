"""In-process wake-ups for stream readers.

The bus carries no data: a reader that wakes re-reads the events table from its last
sequence number, so a lost or duplicated wake-up can delay a reader, never lose an event.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager


class Subscription:
    """One reader's wake-up flag for one stream."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self._flag = asyncio.Event()

    def wake(self) -> None:
        self._flag.set()

    async def wait(self, timeout_s: float) -> bool:
        """True when woken before the timeout. The flag resets, so wake-ups that arrive
        while the reader is busy collapse into one."""
        try:
            await asyncio.wait_for(self._flag.wait(), timeout_s)
        except TimeoutError:
            return False
        self._flag.clear()
        return True


class EventBus:
    def __init__(self) -> None:
        self._subscriptions: defaultdict[str, set[Subscription]] = defaultdict(set)

    @contextmanager
    def subscribe(self, stream: str) -> Iterator[Subscription]:
        subscription = Subscription(stream)
        self._subscriptions[stream].add(subscription)
        try:
            yield subscription
        finally:
            self._subscriptions[stream].discard(subscription)
            if not self._subscriptions[stream]:
                del self._subscriptions[stream]

    def publish(self, stream: str) -> None:
        for subscription in self._subscriptions.get(stream, ()):
            subscription.wake()

    def wake_all(self) -> None:
        """After a gap in notifications (a reconnect), every reader re-reads."""
        for subscriptions in self._subscriptions.values():
            for subscription in subscriptions:
                subscription.wake()

    def subscriber_count(self, stream: str) -> int:
        return len(self._subscriptions.get(stream, ()))
