"""One idempotent create for agents, workflow definitions, runs (a client's and a parent's
spawned children) and workflow activations, on the real database: creates racing with one
key make one resource and the others replay it, a key reused for another request is
refused, and the helper itself stores the key with the resource, its run and its response
in the create's transaction, and nothing without a key."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.engine import AgentCommands
from app.agents.schemas import AgentCreate
from app.core.errors import IdempotencyKeyReused
from app.core.model_config import ModelConfig
from app.db.idempotent_create import CreateKey, keyed_create
from app.events.engine.bus import EventBus
from app.events.models import IdempotencyKey
from app.runs.engine.runs import RunCommands
from app.runs.models import Agent, Run
from app.runs.schemas.runs import RunCreate
from app.tasks.engine.task_engine import TaskEngine
from app.workflows.engine.workflows import WorkflowCommands
from app.workflows.models import Workflow, WorkflowExecution
from app.workflows.schemas.workflows import ActivateRequest
from tests.support.engine import ManualClock
from tests.workflows.test_workflow_observer import LINE

MODEL = ModelConfig(provider="scripted", name="scripted", script=[{"text": "done"}])
WINDOW = timedelta(hours=1)

# A create with the key "race" and a request hash: (resource id, replayed).
Create = Callable[[str], Awaitable[tuple[str, bool]]]


async def count(sessionmaker: async_sessionmaker[AsyncSession], model: type) -> int:
    async with sessionmaker() as session:
        return int(await session.scalar(select(func.count()).select_from(model)) or 0)


async def keyed_creates(
    kind: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    engine: TaskEngine,
) -> tuple[Create, type]:
    """The keyed create of `kind`, and the table its resources go to."""
    agents = AgentCommands(sessionmaker)
    runs = RunCommands(sessionmaker, bus)
    workflows = WorkflowCommands(sessionmaker, bus, engine)
    if kind == "agent":

        async def agent(digest: str) -> tuple[str, bool]:
            body = AgentCreate(name="a", model=MODEL)
            made, replayed = await agents.create_keyed(
                body, idempotency_key="race", request_hash=digest
            )
            return made.id, replayed

        return agent, Agent
    if kind == "workflow":

        async def workflow(digest: str) -> tuple[str, bool]:
            made, replayed = await workflows.create_keyed(
                LINE, idempotency_key="race", request_hash=digest
            )
            return made.id, replayed

        return workflow, Workflow
    if kind in ("run", "child run"):
        agent_id = (await agents.create(AgentCreate(name="a", model=MODEL))).id
        parent_id = None
        if kind == "child run":
            parent_id = (await runs.create(RunCreate(agent_id=agent_id, input="parent")))[0].id

        async def run(digest: str) -> tuple[str, bool]:
            made, replayed = await runs.create(
                RunCreate(agent_id=agent_id, input="work", lane=f"lane-{digest}"),
                parent_run_id=parent_id,
                idempotency_key="race",
                request_hash=digest,
            )
            return made.id, replayed

        return run, Run
    assert kind == "activation"
    definition = await workflows.create(LINE)

    async def activation(digest: str) -> tuple[str, bool]:
        made = await workflows.activate(
            definition.id, ActivateRequest(), "tester", idempotency_key="race", request_hash=digest
        )
        return made.execution.id, made.replayed

    return activation, WorkflowExecution


@pytest.mark.parametrize("kind", ["agent", "workflow", "run", "child run", "activation"])
async def test_creates_racing_with_one_key_make_one_resource_and_another_body_is_refused(
    kind: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    engine: TaskEngine,
) -> None:
    create, table = await keyed_creates(kind, sessionmaker, bus, engine)
    before = await count(sessionmaker, table)

    answers = await asyncio.gather(*(create("h") for _ in range(6)))

    assert len({made for made, _ in answers}) == 1
    assert sorted(replayed for _, replayed in answers) == [False] + [True] * 5
    assert await count(sessionmaker, table) == before + 1
    with pytest.raises(IdempotencyKeyReused):
        await create("another body")
    assert await count(sessionmaker, table) == before + 1
    assert await count(sessionmaker, IdempotencyKey) == 1


async def failed_create(
    sessionmaker: async_sessionmaker[AsyncSession], key: CreateKey, clock: ManualClock
) -> None:
    async with sessionmaker() as session, session.begin():
        create = await keyed_create(session, key, now=clock(), retention=WINDOW)
        await create.remember("res_2")
        raise RuntimeError("the create failed after its key was stored")


async def test_the_key_is_stored_with_its_resource_run_and_response_in_the_same_transaction(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    clock = ManualClock()
    key = CreateKey("tests.scope", "k-1", "h", run_id="run_1")

    async with sessionmaker() as session, session.begin():
        create = await keyed_create(session, key, now=clock(), retention=WINDOW)
        assert create.replay is None
        await create.remember("res_1", {"id": "res_1", "name": "first"})
    clock.advance(days=30)  # a run's key outlives the clients' window
    async with sessionmaker() as session, session.begin():
        create = await keyed_create(session, key, now=clock(), retention=WINDOW)
    assert create.replay is not None
    assert (create.replay.resource_id, create.replay.response, create.replay.run_id) == (
        "res_1",
        {"id": "res_1", "name": "first"},
        "run_1",
    )

    with pytest.raises(IdempotencyKeyReused):
        async with sessionmaker() as session, session.begin():
            await keyed_create(
                session, CreateKey("tests.scope", "k-1", "other"), now=clock(), retention=WINDOW
            )
    with pytest.raises(RuntimeError):  # rolled back: the key goes with the create
        await failed_create(sessionmaker, CreateKey("tests.scope", "k-2", "h"), clock)
    async with sessionmaker() as session, session.begin():
        create = await keyed_create(session, None, now=clock(), retention=WINDOW)
        assert create.replay is None
        await create.remember("res_3")  # no key: nothing to remember
    assert await count(sessionmaker, IdempotencyKey) == 1


async def test_a_clients_key_is_forgotten_after_the_window_and_its_row_replaced(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    clock = ManualClock()
    key = CreateKey.of("tests.scope", "k-1", None)
    assert key == CreateKey("tests.scope", "k-1", "")
    assert CreateKey.of("tests.scope", None, "h") is None and CreateKey.of("s", "", "h") is None

    async with sessionmaker() as session, session.begin():
        create = await keyed_create(session, key, now=clock(), retention=WINDOW)
        await create.remember("res_1")
    clock.advance(hours=1)  # the last instant of the window
    async with sessionmaker() as session, session.begin():
        create = await keyed_create(session, key, now=clock(), retention=WINDOW)
        assert create.replay is not None and create.replay.resource_id == "res_1"
    clock.advance(seconds=1)
    async with sessionmaker() as session, session.begin():
        create = await keyed_create(session, key, now=clock(), retention=WINDOW)
        assert create.replay is None
        await create.remember("res_2")
    async with sessionmaker() as session:
        rows = (await session.scalars(select(IdempotencyKey))).all()
    assert [(r.key, r.resource_id, r.response, r.run_id) for r in rows] == [
        ("k-1", "res_2", {}, None)
    ]
