"""Keyed creates of agents and workflow definitions at the edge of the window, with an
injected clock: a key replays up to exactly the retention, and is forgotten a second later
(the HTTP tests in tests/db/test_create_idempotency.py check the rest)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.engine import AgentCommands
from app.agents.schemas import AgentCreate
from app.core.errors import IdempotencyKeyReused
from app.core.model_config import ModelConfig
from app.db.idempotency import request_hash
from app.events.engine.bus import EventBus
from app.tasks.engine.task_engine import TaskEngine
from app.workflows.engine.workflows import WorkflowCommands
from tests.support.engine import ManualClock
from tests.workflows.test_workflow_observer import LINE

WINDOW = timedelta(hours=2)
MODEL = ModelConfig(provider="scripted", name="scripted", script=[{"text": "done"}])


async def test_an_agent_key_replays_through_the_window_and_is_new_after_it(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    clock = ManualClock()
    agents = AgentCommands(sessionmaker, clock=clock, idempotency_retention=WINDOW)
    body = AgentCreate(name="a", model=MODEL)
    digest = request_hash(body.model_dump(mode="json"))
    first, replayed = await agents.create_keyed(body, idempotency_key="a-1", request_hash=digest)
    assert replayed is False

    clock.advance(hours=2)
    replay, replayed = await agents.create_keyed(body, idempotency_key="a-1", request_hash=digest)
    assert (replay, replayed) == (first, True)
    with pytest.raises(IdempotencyKeyReused):
        await agents.create_keyed(body, idempotency_key="a-1", request_hash="another body")

    clock.advance(seconds=1)
    fresh, replayed = await agents.create_keyed(body, idempotency_key="a-1", request_hash="x")
    assert replayed is False and fresh.id != first.id


async def test_a_workflow_key_replays_through_the_window_and_is_new_after_it(
    sessionmaker: async_sessionmaker[AsyncSession], bus: EventBus, engine: TaskEngine
) -> None:
    clock = ManualClock()
    commands = WorkflowCommands(
        sessionmaker, bus, engine, clock=clock, idempotency_retention=WINDOW
    )
    digest = request_hash(LINE.model_dump(mode="json"))
    first, replayed = await commands.create_keyed(LINE, idempotency_key="w-1", request_hash=digest)
    assert replayed is False

    clock.advance(hours=2)
    replay, replayed = await commands.create_keyed(LINE, idempotency_key="w-1", request_hash=digest)
    assert (replay, replayed) == (first, True)

    clock.advance(seconds=1)
    fresh, replayed = await commands.create_keyed(LINE, idempotency_key="w-1", request_hash=digest)
    assert replayed is False and fresh.id != first.id
