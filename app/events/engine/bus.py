"""In-process wake-ups for stream readers.

The bus carries no persisted data: a reader that wakes re-reads the events table from its
last sequence number, so a lost or duplicated wake-up can delay a reader, never lose an
event. Ephemeral events (text deltas of a streaming LLM call) ride along for local readers
only; they are a preview of what the persisted events will say, and may be dropped.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

EPHEMERAL_BACKLOG = 1000


class Subscription:
    """One reader's wake-up flag for one stream. A reader that does not want the ephemeral
    events (`ephemeral=False`) is not woken by them either: a streaming LLM call offers
    one per text delta."""

    def __init__(self, stream: str, *, ephemeral: bool = True) -> None:
        self.stream = stream
        self._flag = asyncio.Event()
        self._wants_ephemeral = ephemeral
        self._ephemeral: deque[tuple[str, dict[str, Any]]] = deque(maxlen=EPHEMERAL_BACKLOG)

    def offer(self, event_type: str, data: dict[str, Any]) -> None:
        if not self._wants_ephemeral:
            return
        self._ephemeral.append((event_type, data))
        self._flag.set()

    def take_ephemeral(self) -> list[tuple[str, dict[str, Any]]]:
        taken = list(self._ephemeral)
        self._ephemeral.clear()
        return taken

    def wake(self) -> None:
        self._flag.set()

    def take_wake(self) -> bool:
        """Without waiting: whether a wake-up came since the last one was taken."""
        woken = self._flag.is_set()
        self._flag.clear()
        return woken

    async def wait(self, timeout_s: float) -> bool:
        """True when woken before the timeout. The flag resets, so wake-ups that arrive
        while the reader is busy collapse into one."""
        try:
            # Not `wait_for`: on Python 3.11 it swallows a cancel that arrives as the flag
            # is set, and the reader would not stop.
            async with asyncio.timeout(timeout_s):
                await self._flag.wait()
        except TimeoutError:
            return False
        self._flag.clear()
        return True


class EventBus:
    def __init__(self) -> None:
        self._subscriptions: defaultdict[str, set[Subscription]] = defaultdict(set)

    @contextmanager
    def subscribe(self, stream: str, *, ephemeral: bool = True) -> Iterator[Subscription]:
        subscription = Subscription(stream, ephemeral=ephemeral)
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

    def publish_ephemeral(self, stream: str, event_type: str, data: dict[str, Any]) -> None:
        for subscription in self._subscriptions.get(stream, ()):
            subscription.offer(event_type, data)

    def wake_all(self) -> None:
        """After a gap in notifications (a reconnect), every reader re-reads."""
        for subscriptions in self._subscriptions.values():
            for subscription in subscriptions:
                subscription.wake()

    def subscriber_count(self, stream: str) -> int:
        return len(self._subscriptions.get(stream, ()))
