"""Helpers for engine tests: injected clocks (counting, manual), a gate that holds the
writer, and a reader of what is committed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.streams import TASK_STREAM
from app.events import store as event_store
from app.tasks.engine.task_engine import MutationResult, TaskEngine
from app.tasks.schemas.tasks import TaskRead, TransitionRead
from app.tasks.store import tasks as task_store

StartEngine = Callable[..., TaskEngine]


class CountingClock:
    """Each read is one second after the last; `reads` counts the writer's transactions."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> datetime:
        self.reads += 1
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=self.reads)


class ManualClock:
    """A clock that stands still until the test moves it."""

    def __init__(self, now: datetime = datetime(2026, 1, 1, tzinfo=UTC)) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class Gate:
    """An observer that holds the writer after a commit until `opened` is set."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.opened = asyncio.Event()

    async def __call__(self, result: MutationResult) -> None:
        self.entered.set()
        await self.opened.wait()


class Reader:
    """What is committed, each read in a fresh session of its own."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def task(self, task_id: str) -> TaskRead | None:
        async with self._sessions() as session:
            return await task_store.get_task(session, task_id)

    async def tasks(self) -> list[TaskRead]:
        async with self._sessions() as session:
            return await task_store.list_tasks(session, after_id=None, limit=1000, filters={})

    async def trail(self, task_id: str) -> list[TransitionRead]:
        async with self._sessions() as session:
            return await task_store.list_transitions(session, task_id)

    async def events(self) -> list[event_store.StoredEvent]:
        async with self._sessions() as session:
            return await event_store.read_events(session, TASK_STREAM, after=0, limit=1000)
