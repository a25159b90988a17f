"""The idempotency sweep: on a tick, delete the keys past their retention window, so the
table holds about one window of keys instead of growing without bound.

Lookups already ignore an expired key (`db/idempotency.py`), so when the sweep runs
changes nothing a client sees; it only reclaims space. Each pass deletes in chunks of
`chunk` rows, one short transaction each (oldest first, each kind by a `created_at` index
of its own), until nothing expired is left:
1. clients' keys (tasks, runs, workflow activations) created before now - retention;
2. keys made by runs' tool calls (spawned child runs, `create_task`'s tasks: every key
   with a `run_id`) past the window whose run can never run again (completed or
   cancelled): a run that may still run keeps them, however old.

Several processes may sweep at once: chunks take their rows with SKIP LOCKED. The first
pass runs at start-up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db import idempotency
from app.runtime.components import Loop, Wakes
from app.telemetry.logs import log_events

CHUNK = 1_000


class IdempotencySweep:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        retention: timedelta = idempotency.DEFAULT_RETENTION,
        interval_s: float = 3_600.0,
        chunk: int = CHUNK,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if chunk < 1:
            raise ValueError("chunk must be at least 1")
        self._sessionmaker = sessionmaker
        self._retention = retention
        self._chunk = chunk
        self._clock = clock
        self.loop = Loop(
            "idempotency-sweep", self.run_once, Wakes(interval_s), sleep=sleep, clock=clock
        )

    def start(self) -> None:
        """The first pass runs now (at start-up), then one every `interval_s`."""
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.stop()

    async def run_once(self) -> int:
        """Delete every key expired at this pass's start; the number deleted."""
        live_since = self._clock() - self._retention
        clients = await self._in_chunks(
            lambda session: idempotency.delete_expired(session, live_since, limit=self._chunk)
        )
        runs = await self._in_chunks(
            lambda session: idempotency.delete_settled_run_keys(
                session, live_since, limit=self._chunk
            )
        )
        if clients or runs:
            log_events([("idempotency.sweep", {"deleted": clients, "run_deleted": runs})])
        return clients + runs

    async def _in_chunks(self, step: Callable[[AsyncSession], Awaitable[int]]) -> int:
        total = 0
        while True:
            async with self._sessionmaker() as session, session.begin():
                deleted = await step(session)
            total += deleted
            if deleted < self._chunk:
                return total
