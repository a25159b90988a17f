"""Feeds the EventBus from Postgres NOTIFY, so writes by other processes wake local readers.

One dedicated connection per process. When it drops, the listener reconnects and wakes
every reader, since notifications sent meanwhile are gone (the readers poll anyway).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import asyncpg

from app.events.engine.bus import EventBus
from app.events.store import NOTIFY_CHANNEL

log = logging.getLogger(__name__)


class PgListener:
    def __init__(self, dsn: str, bus: EventBus, *, reconnect_delay_s: float = 1.0) -> None:
        self._dsn = dsn
        self._bus = bus
        self._reconnect_delay_s = reconnect_delay_s
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="pg-listener")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            self._bus.publish(json.loads(payload)["stream"])
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring malformed notification %r", payload[:200])

    async def _run(self) -> None:
        while True:
            closed = asyncio.Event()
            try:
                conn = await asyncpg.connect(self._dsn)
            except (OSError, asyncpg.PostgresError) as exc:
                log.warning("event listener cannot connect (%s); retrying", type(exc).__name__)
                await asyncio.sleep(self._reconnect_delay_s)
                continue
            try:
                conn.add_termination_listener(lambda _c, closed=closed: closed.set())
                await conn.add_listener(NOTIFY_CHANNEL, self._on_notify)
                self.connected.set()
                self._bus.wake_all()
                await closed.wait()
                log.warning("event listener connection lost; reconnecting")
            finally:
                self.connected.clear()
                await asyncio.shield(conn.close(timeout=2))
            await asyncio.sleep(self._reconnect_delay_s)
