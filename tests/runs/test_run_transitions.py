"""The one writer of a run's status refuses what the run state machine forbids, whichever
path asks: a claim, a release at shutdown, a reconciler time-out, a boundary, a command;
and the store refuses a status written around it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import InvalidTransition
from app.core.states import RunStatus
from app.runs.engine import run_transitions
from app.runs.engine.reconciler import Reconciler
from app.runs.schemas.runs import RunRead
from app.runs.store import runs as run_store
from tests.support.runs import Harness, say


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db) as harness:
        yield harness


async def _completed(h: Harness) -> RunRead:
    run = await h.finish(await h.agent(say("done")))
    assert run.status is RunStatus.COMPLETED
    return run


async def test_a_settled_run_is_never_claimed(h: Harness) -> None:
    run = await _completed(h)
    async with h.sessionmaker() as session, session.begin():
        claimed = await run_transitions.claim(session, owner="w", limit=10, ttl_s=30)
    assert claimed == []
    assert (await h.run(run.id)).status is RunStatus.COMPLETED


async def test_a_release_leaves_a_run_cancelled_under_its_lease_alone(h: Harness) -> None:
    await h.start(await h.agent(say("never said")))
    async with h.sessionmaker() as session, session.begin():
        (run,) = await run_transitions.claim(session, owner="w", limit=1, ttl_s=30)
    # Its worker's last boundary settled it as cancelled; a shutdown then releases it.
    async with h.sessionmaker() as session, session.begin():
        written = await run_transitions.write_leased(
            session, [(run.id, "w", run.lease_token, {"status": RunStatus.CANCELLED})]
        )
    assert written[run.id].status is RunStatus.CANCELLED
    before = await h.event_types(run.id)
    async with h.sessionmaker() as session, session.begin():
        released = await run_transitions.release(
            session, owner="w", leases=[(run.id, run.lease_token)], now=datetime.now(UTC)
        )
    assert released == []
    assert (await h.run(run.id)).status is RunStatus.CANCELLED
    assert await h.event_types(run.id) == before  # no `agent_run.interrupted`


async def test_the_reconciler_refuses_to_time_out_a_completed_run(h: Harness) -> None:
    run = await _completed(h)
    before = await h.event_types(run.id)
    reconciler = Reconciler(h.sessionmaker, h.bus, h.runs)
    with pytest.raises(InvalidTransition) as refused:
        async with h.sessionmaker() as session, session.begin():
            await reconciler.time_out(session, run, datetime.now(UTC))
    assert (refused.value.current, refused.value.target) == ("completed", "timed_out")
    after = await h.run(run.id)
    assert (after.status, after.version) == (RunStatus.COMPLETED, run.version)
    assert await h.event_types(run.id) == before


async def test_a_boundary_cannot_move_its_run_back_to_running(h: Harness) -> None:
    await h.start(await h.agent(say("never said")))
    async with h.sessionmaker() as session, session.begin():
        (run,) = await run_transitions.claim(session, owner="w", limit=1, ttl_s=30)
    with pytest.raises(InvalidTransition):
        async with h.sessionmaker() as session, session.begin():
            await run_transitions.write_leased(
                session, [(run.id, "w", run.lease_token, {"status": RunStatus.RUNNING})]
            )
    assert (await h.run(run.id)).version == run.version


async def test_a_move_of_a_settled_run_is_refused_and_writes_nothing(h: Harness) -> None:
    run = await _completed(h)
    async with h.sessionmaker() as session, session.begin():
        locked = await run_store.get_run(session, run.id, lock=True)
        assert locked is not None
        with pytest.raises(InvalidTransition) as refused:
            await run_transitions.move(
                session, locked, RunStatus.QUEUED, datetime.now(UTC), events=[]
            )
    assert refused.value.allowed == []
    assert (await h.run(run.id)).version == run.version


async def test_the_store_refuses_a_status_written_around_the_transitions(h: Harness) -> None:
    run = await h.start(await h.agent(say("never said")))
    with pytest.raises(ValueError, match="run_transitions"):
        async with h.sessionmaker() as session, session.begin():
            await run_store.update_run(
                session, run.id, read_version=run.version, values={"status": "cancelled"}
            )
    assert (await h.run(run.id)).status is RunStatus.QUEUED
