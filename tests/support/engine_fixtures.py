"""A real TaskEngine writing to the real (private) database, tables emptied before each
test that asks for it. The engine's clock is injected and counts its reads: the writer reads it once
per transaction it opens, which lets tests see how mutations were grouped."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.db.connection import make_sessionmaker
from app.events.engine.bus import EventBus
from app.tasks.engine.task_engine import TaskEngine
from tests.support.engine import CountingClock, Gate, Reader, StartEngine


@pytest.fixture
def sessionmaker(clean_db: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return make_sessionmaker(clean_db)


@pytest.fixture
def read(sessionmaker: async_sessionmaker[AsyncSession]) -> Reader:
    return Reader(sessionmaker)


@pytest.fixture
def bus() -> EventBus:
    return EventBus()


@pytest.fixture
def clock() -> CountingClock:
    return CountingClock()


@pytest.fixture
async def start_engine(
    sessionmaker: async_sessionmaker[AsyncSession], bus: EventBus, clock: CountingClock
) -> AsyncIterator[StartEngine]:
    """Start engines with the test's clock (and any options); all are stopped at teardown."""
    started: list[TaskEngine] = []

    def start(**options: Any) -> TaskEngine:
        engine = TaskEngine(sessionmaker, bus, **{"clock": clock, **options})
        engine.start()
        started.append(engine)
        return engine

    yield start
    for engine in reversed(started):
        await engine.stop(drain_timeout_s=5)


@pytest.fixture
async def engine(start_engine: StartEngine) -> TaskEngine:
    return start_engine()  # async: the writer task needs the running loop


@pytest.fixture
def gate(engine: TaskEngine) -> Gate:
    """Holds `engine`'s writer after each commit until the test opens it."""
    held = Gate()
    engine.add_observer(held)
    return held
