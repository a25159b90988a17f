"""The history's append is fenced in its statement: a worker whose lease was taken over
appends nothing (and is counted), while the other runs of its group are written."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import Message
from app.core.vocabulary import StepKind
from app.runs.engine import run_transitions
from app.runs.engine.leases import LeaseTerm
from app.runs.engine.reconciler import Reconciler
from app.runs.loop.boundary import Boundary, BoundaryWrite, write_boundaries
from app.runs.loop.deps import LeaseLost
from app.runs.loop.leased_run import LeasedRun
from app.runs.schemas.runs import RunRead
from app.runs.store import history
from app.telemetry.metrics import Metrics
from tests.support.runs import Harness, say

TTL_S = 30.0


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db) as harness:
        yield harness


async def _claimed(h: Harness, owner: str) -> RunRead:
    async with h.sessionmaker() as session, session.begin():
        (claimed,) = await run_transitions.claim(session, owner=owner, limit=1, ttl_s=TTL_S)
    return claimed


async def _steps(h: Harness, run_id: str) -> list[history.StoredStep]:
    async with h.sessionmaker() as session:
        return await history.steps(session, run_id, after=0, limit=100)


def _input() -> Boundary:
    return Boundary(StepKind.INPUT, messages=[Message.user_text("hello")])


async def test_a_worker_whose_lease_was_taken_appends_nothing_and_is_counted(h: Harness) -> None:
    run = await h.start(await h.agent(say("done")))
    first = await _claimed(h, "worker-1")
    async with h.sessionmaker() as session, session.begin():
        await session.execute(
            text("UPDATE runs SET lease_expires_at = now() - interval '1 s' WHERE id = :id"),
            {"id": run.id},
        )
    await Reconciler(h.sessionmaker, h.bus, h.runs).run_once()  # timed out, requeued
    second = await _claimed(h, "worker-2")
    assert second.lease_token > first.lease_token
    before = await _steps(h, run.id)

    metrics = Metrics()
    deps = dataclasses.replace(h.deps, metrics=metrics)
    stale = LeasedRun(
        deps, first, owner="worker-1", term=LeaseTerm(TTL_S, sent_at=time.monotonic())
    )
    with pytest.raises(LeaseLost):
        await stale.commit(_input())

    assert await _steps(h, run.id) == before
    assert metrics.stale_appends._value.get() == 1


async def test_one_statement_writes_the_live_runs_of_a_group_and_fences_the_stale_one(
    h: Harness,
) -> None:
    agent = await h.agent(say("done"))
    stale_run = await h.start(agent, "one")
    live_run = await h.start(agent, "two")
    async with h.sessionmaker() as session, session.begin():
        claimed = await run_transitions.claim(session, owner="worker-1", limit=2, ttl_s=TTL_S)
    by_id = {r.id: r for r in claimed}
    async with h.sessionmaker() as session, session.begin():  # another claim took this one
        await session.execute(
            text("UPDATE runs SET lease_token = lease_token + 1 WHERE id = :id"),
            {"id": stale_run.id},
        )

    def write(run: RunRead) -> BoundaryWrite:
        return BoundaryWrite(
            run=run,
            owner="worker-1",
            token=run.lease_token,
            position=0,
            boundary=_input(),
            idempotent={},
            now=datetime.now(UTC),
            term=LeaseTerm(TTL_S, sent_at=time.monotonic()),
        )

    async with h.sessionmaker() as session, session.begin():
        written = await write_boundaries(
            session, [write(by_id[stale_run.id]), write(by_id[live_run.id])]
        )
    assert written[0] is None
    assert written[1] is not None and written[1].id == live_run.id
    assert [s.kind for s in await _steps(h, live_run.id)] == [StepKind.NOTE, StepKind.INPUT]
    assert [s.kind for s in await _steps(h, stale_run.id)] == [StepKind.NOTE]
