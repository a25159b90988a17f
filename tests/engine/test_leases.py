"""Leases: a run whose worker stops renewing is reclaimed by another, whose new token
fences the old worker's writes; a side-effecting call cut short is never run twice; a
pool that stops gives its unfinished runs back to the queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.states import RunStatus
from tests.support.runs import SAFETY_S, Harness, assert_valid_transcript, call, say


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db) as harness:
        yield harness


async def _expire_lease(h: Harness, run_id: str) -> None:
    async with h.sessionmaker() as session, session.begin():
        await session.execute(
            text("UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = :id"),
            {"id": run_id},
        )


async def test_an_expired_lease_is_reclaimed_and_the_old_worker_is_fenced_off(h: Harness) -> None:
    agent = await h.agent(call("gate"), say("finished"))
    run = await h.start(agent)
    old = h.new_pool(capacity=1, owner="old-worker")
    new = h.new_pool(capacity=1, owner="new-worker")
    await old.claim()
    async with asyncio.timeout(SAFETY_S):
        await h.tools.gate_entered.wait()  # the side effect is under way
    await _expire_lease(h, run.id)

    async with asyncio.timeout(SAFETY_S):
        await new.run_until_idle()
    reclaimed = await h.run(run.id)
    assert reclaimed.lease_token == run.lease_token + 2  # claimed twice
    # The new owner cannot know whether the side effect happened: it asks a human.
    assert reclaimed.status is RunStatus.WAITING_ON_HUMAN
    assert reclaimed.waiting_for is not None
    assert reclaimed.waiting_for["reason"] == "resume_unsafe"
    assert "agent_run.resume_unsafe" in await h.event_types(run.id)

    h.tools.gate_release.set()  # the old worker's tool finishes late
    async with asyncio.timeout(SAFETY_S):
        await old.run_until_idle()
    after = await h.run(run.id)
    assert after.status is RunStatus.WAITING_ON_HUMAN and after.version == reclaimed.version
    assert h.tools.calls["gate"] == 1  # never run a second time

    await h.runs.respond(run.id, "it went through")
    await h.drain()
    done = await h.run(run.id)
    assert done.status is RunStatus.COMPLETED and done.result == "finished"
    assert_valid_transcript(await h.messages(run.conversation_id))


async def test_a_stopping_pool_gives_unfinished_runs_back_to_the_queue(h: Harness) -> None:
    agent = await h.agent(call("gate"), say("finished"))
    first = await h.start(agent)
    behind = await h.start(agent, conversation_id=first.conversation_id)
    pool = h.new_pool(capacity=1, owner="leaving")
    await pool.claim()
    async with asyncio.timeout(SAFETY_S):
        await h.tools.gate_entered.wait()
    await pool.stop(grace_s=0)

    released = await h.run(first.id)
    assert released.status is RunStatus.QUEUED and released.lease_owner is None
    assert "agent_run.interrupted" in await h.event_types(first.id)
    assert (await h.run(behind.id)).status is RunStatus.QUEUED

    await h.drain()  # the next worker resumes it first: it keeps its place in the lane
    resumed = await h.run(first.id)
    assert resumed.status is RunStatus.WAITING_ON_HUMAN  # the gate call was cut short
    assert (await h.run(behind.id)).status is RunStatus.QUEUED  # the lane is still held
