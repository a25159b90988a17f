"""Idempotency keys expire, on the real database with injected clocks: a client's key
replays within its window and is forgotten after it (runs, workflow activations; tasks are
in test_task_engine.py); a key a run's tool call made (a spawned child run, a task of
`create_task`) lasts while that run may run again and is swept once the run can never run
again and the window is past; the sweep deletes only expired keys, in bounded chunks; and
the settings that say how long.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.engine import AgentCommands
from app.agents.schemas import AgentCreate
from app.core.config import IdempotencySettings, load_settings
from app.core.errors import IdempotencyKeyReused
from app.core.model_config import ModelConfig
from app.core.states import RUN_TERMINAL, RunStatus
from app.db import idempotency
from app.db.idempotency import DEFAULT_RETENTION, KeyRecord, request_hash
from app.db.idempotency_sweep import IdempotencySweep
from app.events.engine.bus import EventBus
from app.events.models import IdempotencyKey
from app.runs.engine.runs import CREATE_SCOPE, SPAWN_SCOPE, RunCommands
from app.runs.schemas.runs import RunCreate, RunRead
from app.runs.tools.base import Tool, ToolContext
from app.tasks.engine.task_engine import CREATE_SCOPE as TASK_CREATE_SCOPE
from app.tasks.engine.task_engine import TOOL_CREATE_SCOPE, TaskEngine
from app.tasks.engine.task_mutations import CreateTask
from app.tasks.schemas.tasks import TaskCreate
from app.tasks.tools import task_tools
from app.workflows.engine.workflows import Activation, WorkflowCommands
from app.workflows.schemas.workflows import ActivateRequest
from tests.support.engine import ManualClock
from tests.workflows.test_workflow_observer import LINE

DAY = timedelta(hours=24)


@pytest.fixture
def clock() -> ManualClock:
    """Stands still until a test moves it (the engine's TaskEngine reads it too)."""
    return ManualClock()


@pytest.fixture
def runs(
    sessionmaker: async_sessionmaker[AsyncSession], bus: EventBus, clock: ManualClock
) -> RunCommands:
    return RunCommands(sessionmaker, bus, clock=clock, idempotency_retention=DAY)


@pytest.fixture
async def agent_id(sessionmaker: async_sessionmaker[AsyncSession]) -> str:
    model = ModelConfig(provider="scripted", name="scripted", script=[{"text": "done"}])
    return (await AgentCommands(sessionmaker).create(AgentCreate(name="a", model=model))).id


async def stored_keys(sessionmaker: async_sessionmaker[AsyncSession]) -> set[tuple[str, str]]:
    async with sessionmaker() as session:
        rows = await session.execute(select(IdempotencyKey.scope, IdempotencyKey.key))
        return {(scope, key) for scope, key in rows}


async def key_runs(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> dict[tuple[str, str], str | None]:
    """Each stored key's run (the run whose tool call made it; None for a client's)."""
    async with sessionmaker() as session:
        rows = await session.execute(
            select(IdempotencyKey.scope, IdempotencyKey.key, IdempotencyKey.run_id)
        )
        return {(scope, key): run_id for scope, key, run_id in rows}


async def set_status(
    sessionmaker: async_sessionmaker[AsyncSession], run_id: str, status: RunStatus
) -> None:
    """Put a run in `status` as its loop or a person would have (only the status matters
    to the keys it made)."""
    async with sessionmaker() as session, session.begin():
        await session.execute(
            text("UPDATE runs SET status = :status WHERE id = :id"),
            {"status": status.value, "id": run_id},
        )


# -- runs ------------------------------------------------------------------------------


async def test_a_run_key_replays_within_the_window_and_is_new_after_it(
    runs: RunCommands, clock: ManualClock, agent_id: str
) -> None:
    body = RunCreate(agent_id=agent_id, input="hello")
    digest = request_hash(body.model_dump(mode="json"))
    first, created = await runs.create(body, idempotency_key="r-1", request_hash=digest)
    assert created is False

    clock.advance(hours=24)
    replay, replayed = await runs.create(body, idempotency_key="r-1", request_hash=digest)
    assert (replay.id, replayed) == (first.id, True)
    other = RunCreate(agent_id=agent_id, input="something else")
    with pytest.raises(IdempotencyKeyReused):
        await runs.create(other, idempotency_key="r-1", request_hash="other")

    clock.advance(seconds=1)
    fresh, replayed = await runs.create(other, idempotency_key="r-1", request_hash="other")
    assert replayed is False and fresh.id != first.id and fresh.input == "something else"
    again, replayed = await runs.create(other, idempotency_key="r-1", request_hash="other")
    assert (again.id, replayed) == (fresh.id, True)


async def test_spawn_keys_last_while_the_parent_may_run_again(
    sessionmaker: async_sessionmaker[AsyncSession],
    runs: RunCommands,
    clock: ManualClock,
    agent_id: str,
) -> None:
    parent, _ = await runs.create(RunCreate(agent_id=agent_id, input="split the work"))
    body = RunCreate(agent_id=agent_id, input="part a")
    digest = request_hash(body.model_dump(mode="json"))
    key = f"{parent.id}:toolu_1:0"  # as spawn_child_runs keys its children
    child, _ = await runs.create(
        body, parent_run_id=parent.id, idempotency_key=key, request_hash=digest
    )
    sweep = IdempotencySweep(sessionmaker, retention=DAY, clock=clock)

    clock.advance(days=30)  # e.g. a timed-out parent resumed by hand, a month later
    assert await sweep.run_once() == 0
    again, replayed = await runs.create(
        body, parent_run_id=parent.id, idempotency_key=key, request_hash=digest
    )
    assert (again.id, replayed) == (child.id, True)  # no second child
    # A client's key spelled the same is another key: it neither finds nor blocks the child.
    theirs, replayed = await runs.create(body, idempotency_key=key, request_hash=digest)
    assert replayed is False and theirs.id != child.id and theirs.parent_run_id is None

    await runs.cancel(parent.id)  # queued: cancelled at once, and it never runs again
    assert await key_runs(sessionmaker) == {
        (SPAWN_SCOPE, key): parent.id,
        (CREATE_SCOPE, key): None,
    }
    assert await sweep.run_once() == 1
    assert await stored_keys(sessionmaker) == {(CREATE_SCOPE, key)}  # still in its window


# -- keys made by a run's tool call: create_task ---------------------------------------


@pytest.fixture
def create_task(engine: TaskEngine, sessionmaker: async_sessionmaker[AsyncSession]) -> Tool:
    """The built-in tool, over the test's engine (its clock is the test's)."""
    [tool] = [t for t in task_tools(engine, sessionmaker) if t.name == "create_task"]
    return tool


async def call(tool: Tool, run: RunRead, call_id: str, **arguments: Any) -> dict[str, Any]:
    """One call of `tool` by `run`, as its loop makes it; the result as JSON."""
    context = ToolContext(
        run_id=run.id,
        tool_call_id=call_id,
        agent_id=run.agent_id,
        conversation_id=run.conversation_id,
    )
    result: dict[str, Any] = json.loads(await tool.handler(context, arguments))
    return result


def test_only_completed_and_cancelled_runs_can_never_run_again() -> None:
    """What the sweep's rule rests on: every other status has a way back to the queue (a
    retry, a resume, a person's answer), and a run that runs again re-runs its calls cut
    short."""
    assert RUN_TERMINAL == {RunStatus.COMPLETED, RunStatus.CANCELLED}


async def test_a_create_task_key_replays_after_30_days_while_its_run_may_run_again(
    sessionmaker: async_sessionmaker[AsyncSession],
    runs: RunCommands,
    engine: TaskEngine,
    create_task: Tool,
    clock: ManualClock,
    agent_id: str,
) -> None:
    run, _ = await runs.create(RunCreate(agent_id=agent_id, input="plan the release"))
    made = await call(create_task, run, "toolu_1", title="Write the notes")
    [(_, key)] = await stored_keys(sessionmaker)
    assert await key_runs(sessionmaker) == {(TOOL_CREATE_SCOPE, key): run.id}
    sweep = IdempotencySweep(sessionmaker, retention=DAY, clock=clock)

    clock.advance(days=30)  # e.g. a timed-out run resumed by hand, a month later
    for status in [s for s in RunStatus if s not in RUN_TERMINAL]:
        await set_status(sessionmaker, run.id, status)
        assert await sweep.run_once() == 0, status
        # The create cut short is re-run: it finds the task the first attempt made.
        again = await call(create_task, run, "toolu_1", title="Write the notes")
        assert again["id"] == made["id"], status
    assert len(await stored_keys(sessionmaker)) == 1

    # A client's key spelled the same is another key: it neither finds nor blocks the task.
    body = TaskCreate(title="Write the notes")
    digest = request_hash(body.model_dump(mode="json"))
    theirs = await engine.submit(CreateTask(body, "alice", key, digest))
    assert not theirs.replayed and theirs.task.id != made["id"]
    assert await key_runs(sessionmaker) == {
        (TOOL_CREATE_SCOPE, key): run.id,
        (TASK_CREATE_SCOPE, key): None,
    }


@pytest.mark.parametrize("ending", [RunStatus.COMPLETED, RunStatus.CANCELLED])
async def test_a_create_task_key_is_swept_once_its_run_can_never_run_again_and_past_the_window(
    sessionmaker: async_sessionmaker[AsyncSession],
    runs: RunCommands,
    create_task: Tool,
    clock: ManualClock,
    agent_id: str,
    ending: RunStatus,
) -> None:
    run, _ = await runs.create(RunCreate(agent_id=agent_id, input="plan the release"))
    await call(create_task, run, "toolu_1", title="Write the notes")
    sweep = IdempotencySweep(sessionmaker, retention=DAY, clock=clock)

    clock.advance(hours=1)
    if ending is RunStatus.CANCELLED:
        await runs.cancel(run.id)  # queued: cancelled at once
    else:
        await set_status(sessionmaker, run.id, ending)
    clock.advance(hours=23)  # the run is over, but the key is still within its window
    assert await sweep.run_once() == 0
    assert len(await stored_keys(sessionmaker)) == 1

    clock.advance(seconds=1)
    assert await sweep.run_once() == 1
    assert await stored_keys(sessionmaker) == set()


async def test_one_rule_for_every_key_a_runs_tool_call_made(
    sessionmaker: async_sessionmaker[AsyncSession],
    runs: RunCommands,
    create_task: Tool,
    clock: ManualClock,
    agent_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spawned children's keys and create_task's, of a finished run and of one that may
    run again, and a client's: the sweep takes the finished run's keys of every scope in
    one query (chunk by chunk), keeps the other run's, and the client's by its window."""
    finished, _ = await runs.create(RunCreate(agent_id=agent_id, input="a"))
    waiting, _ = await runs.create(RunCreate(agent_id=agent_id, input="b"))
    child = RunCreate(agent_id=agent_id, input="part")
    for parent in (finished, waiting):
        await call(create_task, parent, "toolu_1", title=f"task of {parent.input}")
        await runs.create(
            child,
            parent_run_id=parent.id,
            idempotency_key=f"{parent.id}:toolu_2:0",
            request_hash=request_hash(child.model_dump(mode="json")),
        )
    await runs.create(child, idempotency_key="client", request_hash="h")
    await set_status(sessionmaker, finished.id, RunStatus.COMPLETED)
    await set_status(sessionmaker, waiting.id, RunStatus.DEAD_LETTER)  # a person may retry it
    made_by = sorted((await key_runs(sessionmaker)).values(), key=str)
    assert made_by == sorted([finished.id] * 2 + [waiting.id] * 2 + [None], key=str)
    chunks: list[int] = []
    delete_settled = idempotency.delete_settled_run_keys

    async def counted(*args: Any, **kwargs: Any) -> int:
        deleted = await delete_settled(*args, **kwargs)
        chunks.append(deleted)
        return deleted

    monkeypatch.setattr(idempotency, "delete_settled_run_keys", counted)
    sweep = IdempotencySweep(sessionmaker, retention=DAY, chunk=1, clock=clock)

    clock.advance(days=2)
    assert await sweep.run_once() == 3  # the client's, and the finished run's two
    assert chunks == [1, 1, 0]
    assert set((await key_runs(sessionmaker)).values()) == {waiting.id}
    assert {scope for scope, _ in await stored_keys(sessionmaker)} == {
        SPAWN_SCOPE,
        TOOL_CREATE_SCOPE,
    }


# -- workflow activations --------------------------------------------------------------


async def test_an_activation_key_replays_within_the_window_and_is_new_after_it(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    engine: TaskEngine,
    clock: ManualClock,
) -> None:
    commands = WorkflowCommands(sessionmaker, bus, engine, clock=clock, idempotency_retention=DAY)
    workflow = await commands.create(LINE)
    body = ActivateRequest(context={"release": "1.0"})
    digest = request_hash([workflow.id, body.model_dump(mode="json")])

    async def activate() -> Activation:
        return await commands.activate(
            workflow.id, body, "tester", idempotency_key="rel-1", request_hash=digest
        )

    first = await activate()
    clock.advance(hours=23)
    replay = await activate()
    clock.advance(hours=2)
    fresh = await activate()

    assert not first.replayed and replay.replayed
    assert replay.execution.id == first.execution.id
    assert not fresh.replayed and fresh.execution.id != first.execution.id


# -- the sweep -------------------------------------------------------------------------


async def test_the_sweep_deletes_only_expired_keys_in_bounded_chunks(
    sessionmaker: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    start = clock.now
    ages = {"ancient": timedelta(days=9), "old": timedelta(hours=25), "edge": DAY, "new": 0 * DAY}
    async with sessionmaker() as session, session.begin():
        for scope in ("tasks.create", CREATE_SCOPE, "workflow-executions.activate"):
            for name, age in ages.items():
                record = KeyRecord(scope, name, "h", f"res-{name}", {})
                await idempotency.insert_keys(session, [record], start - age)
    chunks: list[int] = []
    delete_expired = idempotency.delete_expired

    async def counted(*args: Any, **kwargs: Any) -> int:
        deleted = await delete_expired(*args, **kwargs)
        chunks.append(deleted)
        return deleted

    monkeypatch.setattr(idempotency, "delete_expired", counted)
    sweep = IdempotencySweep(sessionmaker, retention=DAY, chunk=4, clock=clock)

    assert await sweep.run_once() == 6  # "ancient" and "old" of each scope
    assert chunks == [4, 2]  # one transaction per chunk, until a chunk comes up short
    remaining = await stored_keys(sessionmaker)
    assert remaining == {
        (scope, name)
        for scope in ("tasks.create", CREATE_SCOPE, "workflow-executions.activate")
        for name in ("edge", "new")
    }
    assert await sweep.run_once() == 0  # nothing more has expired

    clock.advance(seconds=1)  # now "edge" is past the window too
    assert await sweep.run_once() == 3
    assert {name for _, name in await stored_keys(sessionmaker)} == {"new"}


async def test_the_sweep_passes_at_start_up_then_on_its_interval(
    sessionmaker: async_sessionmaker[AsyncSession], clock: ManualClock
) -> None:
    async with sessionmaker() as session, session.begin():
        old = KeyRecord("tasks.create", "old", "h", "task-1", {})
        await idempotency.insert_keys(session, [old], clock.now - 2 * DAY)
    waits: list[float] = []
    first_pass_done = asyncio.Event()

    async def sleep(interval_s: float) -> None:
        waits.append(interval_s)
        first_pass_done.set()
        await asyncio.Event().wait()  # until stop() cancels it

    sweep = IdempotencySweep(sessionmaker, retention=DAY, interval_s=60, clock=clock, sleep=sleep)
    sweep.start()
    async with asyncio.timeout(10):
        await first_pass_done.wait()
    await sweep.stop()

    assert waits == [60]
    assert await stored_keys(sessionmaker) == set()


# -- settings --------------------------------------------------------------------------


def test_keys_are_remembered_for_24_hours_by_default() -> None:
    settings = IdempotencySettings()
    assert settings.retention == DAY == DEFAULT_RETENTION
    assert settings.sweep_interval_s == 3_600


def test_the_window_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPWRIGHT_IDEMPOTENCY__RETENTION_S", "3600")
    monkeypatch.setenv("LOOPWRIGHT_IDEMPOTENCY__SWEEP_INTERVAL_S", "120")
    settings = load_settings().idempotency
    assert (settings.retention, settings.sweep_interval_s) == (timedelta(hours=1), 120)


@pytest.mark.parametrize(
    "values",
    [
        {"retention_s": 59},  # shorter than a client's retries
        {"retention_s": 366 * 86_400},
        {"retention_s": "a day"},
        {"sweep_interval_s": 0},
        {"sweep_interval_s": 86_401},
    ],
)
def test_settings_out_of_bounds_are_refused(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        IdempotencySettings.model_validate(values)
