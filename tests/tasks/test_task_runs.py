"""Tasks executed by agent runs, on the real database with a real TaskEngine and worker
pool: dispatch once dependencies are done, the run's lifecycle driving the task (review
gate, failure and retry, cancel, shutdown)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.model_config import ScriptedFault, ScriptedTurn
from app.core.states import RunStatus, TaskStatus
from app.core.streams import TASK_STREAM, run_stream
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_mutations import CancelTask, TransitionTask
from app.tasks.engine.task_runs import TaskRuns, run_input, sync_route
from tests.support.runs import SAFETY_S, Harness, call, say
from tests.support.tasks import TaskWorld

T = TaskStatus


@pytest.fixture
async def world(clean_db: AsyncEngine) -> AsyncIterator[TaskWorld]:
    async with Harness.open(clean_db) as h:
        tasks = TaskEngine(h.sessionmaker, h.bus)
        tasks.start()
        bridge = TaskRuns(h.sessionmaker, tasks, h.runs, h.bus, poll_interval_s=0.05)
        bridge.start()
        pool = h.new_pool(capacity=2, owner="pool-b")
        pool.start()
        try:
            yield TaskWorld(h, tasks, bridge, pool)
        finally:
            await pool.stop(grace_s=SAFETY_S)
            await bridge.stop()
            await tasks.stop()


def test_the_route_from_a_task_status_to_its_run_status_walks_allowed_transitions() -> None:
    assert sync_route(T.ASSIGNED, RunStatus.QUEUED) == (T.IN_PROGRESS,)
    assert sync_route(T.IN_PROGRESS, RunStatus.COMPLETED) == (T.IN_REVIEW,)
    assert sync_route(T.INTERRUPTED, RunStatus.COMPLETED) == (
        T.ASSIGNED,
        T.IN_PROGRESS,
        T.IN_REVIEW,
    )
    assert sync_route(T.IN_PROGRESS, RunStatus.DEAD_LETTER) == (T.FAILED,)
    # A queued retry or a timed-out run says nothing new about the task.
    assert sync_route(T.IN_PROGRESS, RunStatus.QUEUED) == ()
    assert sync_route(T.IN_PROGRESS, RunStatus.TIMED_OUT) == ()


async def test_a_task_assigned_to_an_agent_runs_and_parks_in_review(world: TaskWorld) -> None:
    agent = await world.h.agent(say("The report is written."), name="writer")
    task = await world.create("Write the report", "writer", description="Two pages.")
    done = await world.reach(task.id, T.IN_REVIEW)
    [run] = await world.runs(task.id)
    assert (run.status, run.agent_id, run.metadata["task_id"]) == (
        RunStatus.COMPLETED,
        agent.id,
        task.id,
    )
    assert run.input == run_input(task) == "Write the report\n\nTwo pages."
    assert await world.trail(task.id) == [
        (T.ASSIGNED, T.IN_PROGRESS),
        (T.IN_PROGRESS, T.IN_REVIEW),
    ]
    assert done.retry_count == 0


async def test_a_task_waits_for_its_dependencies_to_be_completed(world: TaskWorld) -> None:
    await world.h.agent(say("Done."), name="builder")
    first = await world.create("Lay the foundation", "builder")
    second = await world.create("Build the walls", "builder", dependencies=[first.id])
    await world.reach(first.id, T.IN_REVIEW)
    assert (await world.task(second.id)).status is T.ASSIGNED
    assert await world.runs(second.id) == []
    await world.tasks.submit(TransitionTask(first.id, T.COMPLETED, "reviewer"))
    await world.reach(second.id, T.IN_REVIEW)
    assert len(await world.runs(second.id)) == 1


async def test_a_task_whose_run_fails_is_retried_then_fails_for_good(world: TaskWorld) -> None:
    broken = ScriptedTurn(text="never", fault=ScriptedFault(status=400, times=100))
    await world.h.agent(broken, name="flaky-writer")
    task = await world.create("Write", "flaky-writer", max_retries=1)
    with world.h.bus.subscribe(TASK_STREAM) as wake:
        async with asyncio.timeout(SAFETY_S):
            while (found := await world.task(task.id)).retry_count < 1 or found.status is not (
                T.FAILED
            ):
                await wake.wait(0.05)
    runs = await world.runs(task.id)
    assert [r.status for r in runs] == [RunStatus.FAILED, RunStatus.FAILED]
    assert runs[0].conversation_id == runs[1].conversation_id  # the retry continues it
    assert await world.trail(task.id) == [
        (T.ASSIGNED, T.IN_PROGRESS),
        (T.IN_PROGRESS, T.FAILED),
        (T.FAILED, T.ASSIGNED),
        (T.ASSIGNED, T.IN_PROGRESS),
        (T.IN_PROGRESS, T.FAILED),
    ]


async def test_cancelling_a_task_cancels_its_run_at_the_next_boundary(world: TaskWorld) -> None:
    await world.h.agent(call("gate"), say("unreachable"), name="slow")
    task = await world.create("Wait at the gate", "slow")
    async with asyncio.timeout(SAFETY_S):
        await world.h.tools.gate_entered.wait()
    await world.tasks.submit(CancelTask(task.id, "tester"))
    [run] = await world.runs(task.id)
    with world.h.bus.subscribe(run_stream(run.id)) as wake:
        async with asyncio.timeout(SAFETY_S):
            while not (await world.h.run(run.id)).cancel_requested:
                await wake.wait(0.05)
    world.h.tools.gate_release.set()
    [settled] = await world.h.wait_until_settled([run.id])
    assert settled.status is RunStatus.CANCELLED
    assert (await world.task(task.id)).status is T.CANCELLED


async def test_a_shutdown_interrupts_the_task_and_a_restart_finishes_it(
    world: TaskWorld,
) -> None:
    await world.h.agent(call("gate"), say("Finished after the restart."), name="patient")
    task = await world.create("Survive a restart", "patient")
    async with asyncio.timeout(SAFETY_S):
        await world.h.tools.gate_entered.wait()
    stopping = asyncio.create_task(world.pool.stop(grace_s=SAFETY_S))
    world.h.tools.gate_release.set()  # the loop reaches its next boundary and hands back
    await stopping
    await world.reach(task.id, T.INTERRUPTED)
    replacement = world.h.new_pool(capacity=1, owner="pool-c")
    replacement.start()
    await world.reach(task.id, T.IN_REVIEW)
    assert await world.trail(task.id) == [
        (T.ASSIGNED, T.IN_PROGRESS),
        (T.IN_PROGRESS, T.INTERRUPTED),
        (T.INTERRUPTED, T.ASSIGNED),
        (T.ASSIGNED, T.IN_PROGRESS),
        (T.IN_PROGRESS, T.IN_REVIEW),
    ]


async def test_a_person_s_task_gets_no_run(world: TaskWorld) -> None:
    await world.h.agent(say("Done."), name="robot")
    task = await world.create("Review the contract", "alice")
    await world.bridge.sweep()
    assert (await world.task(task.id)).status is T.ASSIGNED
    assert await world.runs(task.id) == []
