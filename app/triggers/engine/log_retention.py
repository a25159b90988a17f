"""Log retention: on a tick, delete the webhook delivery log and the trigger fire log past
their windows (`WebhookSettings.retention_s`, `TriggerSettings.fire_retention_s`; 30 days
by default, null keeps them), so neither table grows without bound.

A delivery goes only once settled (succeeded or dead-lettered: a pending one is still to
be sent), with its attempts. A fire goes whatever its status; what it started stays. A
webhook delivery id repeated after its fire is gone fires anew, and a schedule's fire
time that old is long behind its `next_fire_at`. Both are deleted by id (ids sort by the
time they were made, so the primary key serves the bound), oldest first, `chunk` rows per
transaction with SKIP LOCKED, so several processes may prune at once. The first pass runs
at start-up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.ids import id_floor
from app.runtime.components import Loop, Wakes
from app.triggers.store import triggers
from app.webhooks import store as webhooks

INTERVAL_S = 3_600.0
CHUNK = 1_000

Prune = Callable[[AsyncSession, str, int], Awaitable[int]]


async def _deliveries(session: AsyncSession, before_id: str, limit: int) -> int:
    return await webhooks.prune_settled(session, before_id=before_id, limit=limit)


async def _fires(session: AsyncSession, before_id: str, limit: int) -> int:
    return await triggers.prune_fires(session, before_id=before_id, limit=limit)


class LogRetention:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        deliveries: timedelta | None,
        fires: timedelta | None,
        interval_s: float = INTERVAL_S,
        chunk: int = CHUNK,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._logs: list[tuple[str, timedelta, Prune]] = [
            (prefix, window, prune)
            for prefix, window, prune in (("whd", deliveries, _deliveries), ("fire", fires, _fires))
            if window is not None
        ]
        self._chunk = chunk
        self._clock = clock
        self.loop = Loop(
            "log retention", self.run_once, Wakes(interval_s), sleep=sleep, clock=clock
        )

    @property
    def keeps_everything(self) -> bool:
        return not self._logs

    def start(self) -> None:
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.stop()

    async def run_once(self) -> dict[str, int]:
        """Delete what is past its window now; rows deleted, by id prefix."""
        now = self._clock()
        deleted: dict[str, int] = {}
        for prefix, window, prune in self._logs:
            bound = id_floor(prefix, now - window)
            deleted[prefix] = 0
            while True:
                async with self._sessionmaker() as session, session.begin():
                    n = await prune(session, bound, self._chunk)
                deleted[prefix] += n
                if n < self._chunk:
                    break
        return deleted
