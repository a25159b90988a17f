"""A worker that holds its lease waits for a database that went away: its boundary writes
are tried again with backoff and commit once the database is back, exactly once, even when
the reply to a COMMIT was lost; a write whose lease was taken meanwhile writes nothing
(`LeaseLost`); past the lease's term the worker gives up; a data error is never retried;
and the heartbeat's renewal waits too.

The database is the real server, reached through a TCP proxy (tests/support/pg_proxy.py)
that refuses or severs connections, or by `pg_terminate_backend`. The committer's clock
and sleep are injected: a wait advances the clock, and the outage ends when the test says.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from app.core.messages import Message
from app.core.vocabulary import StepKind
from app.db.connection import async_url, libpq_url, make_engine, make_sessionmaker
from app.db.outage import connection_lost
from app.runs.engine import run_transitions
from app.runs.engine.leases import LeaseTerm
from app.runs.engine.reconciler import Reconciler
from app.runs.engine.workers import WorkerPool
from app.runs.loop.boundary import RIDE_OUT, Boundary, BoundaryWrite, write_boundaries
from app.runs.loop.deps import LeaseLost
from app.runs.loop.leased_run import LeasedRun
from app.runs.schemas.runs import RunRead
from app.runtime.group_commit import GroupCommitter, RideOut
from tests.support.pg_proxy import PgProxy, pg_proxy
from tests.support.runs import SAFETY_S, Harness, say

TTL_S = 30.0
EVENT = "test.outage_write"


class Outage:
    """The committer's injected clock and sleep: each wait advances the clock by its delay
    and is recorded; `on_wait(n)` runs at the n-th wait (to end the outage, say)."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.waits: list[float] = []
        self.on_wait: dict[int, Callable[[], Awaitable[None]]] = {}

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay_s: float) -> None:
        self.waits.append(delay_s)
        self.now += delay_s
        action = self.on_wait.get(len(self.waits))
        if action is not None:
            await action()


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db) as harness:
        yield harness


@pytest.fixture
async def proxy(database_url: str) -> AsyncIterator[PgProxy]:
    async with pg_proxy(database_url) as running:
        yield running


async def _claimed(h: Harness, owner: str = "worker-1") -> RunRead:
    run = await h.start(await h.agent(say("done")))
    async with h.sessionmaker() as session, session.begin():
        (claimed,) = await run_transitions.claim(session, owner=owner, limit=1, ttl_s=TTL_S)
    assert claimed.id == run.id
    return claimed


@asynccontextmanager
async def _committer(
    url: str, outage: Outage
) -> AsyncIterator[GroupCommitter[BoundaryWrite, RunRead | None]]:
    """The boundary committer as a process has it, on an engine of its own (`url`), with
    the outage's clock and sleep."""
    engine = create_async_engine(
        async_url(url),
        pool_size=1,
        connect_args={"server_settings": {"application_name": "committer-under-test"}},
    )
    ride_out = dataclasses.replace(RIDE_OUT, clock=outage.clock, sleep=outage.sleep)
    committer = GroupCommitter(make_sessionmaker(engine), write_boundaries, ride_out=ride_out)
    committer.start()
    try:
        yield committer
    finally:
        await committer.stop()
        await engine.dispose()


def _leased(h: Harness, run: RunRead, committer: Any, outage: Outage) -> LeasedRun:
    term = LeaseTerm(TTL_S, sent_at=outage.now, clock=outage.clock)
    deps = dataclasses.replace(h.deps, committer=committer)
    return LeasedRun(deps, run, owner=run.lease_owner or "", term=term)


def _boundary() -> Boundary:
    return Boundary(StepKind.INPUT, messages=[Message.user_text("hello")], events=[(EVENT, {})])


async def _written(h: Harness, run: RunRead) -> tuple[int, int]:
    """The boundary's rows as the database has them: (messages, events)."""
    messages = len(await h.messages(run.conversation_id))
    return messages, (await h.event_types(run.id)).count(EVENT)


async def test_a_boundary_write_waits_for_the_database_and_commits_once(
    h: Harness, proxy: PgProxy, database_url: str
) -> None:
    run = await _claimed(h)
    outage = Outage()

    async def back() -> None:
        proxy.restore()

    outage.on_wait[3] = back
    async with _committer(proxy.url(database_url), outage) as committer:
        leased = _leased(h, run, committer, outage)
        proxy.refuse()
        async with asyncio.timeout(SAFETY_S):
            written = await leased.commit(_boundary())
    assert written.id == run.id and written.lease_token == run.lease_token
    assert len(outage.waits) == 3  # three refused attempts, then the database was back
    assert outage.waits == sorted(outage.waits)  # backing off
    assert await _written(h, run) == (1, 1)


async def test_a_connection_terminated_by_the_server_is_replaced_and_the_write_commits(
    h: Harness, database_url: str
) -> None:
    run = await _claimed(h)
    outage = Outage()
    async with _committer(database_url, outage) as committer:
        leased = _leased(h, run, committer, outage)
        await leased.commit(Boundary(StepKind.NOTE, events=[("test.warm_up", {})]))  # a pooled conn
        admin = await asyncpg.connect(libpq_url(database_url))
        try:
            terminated = await admin.fetch(
                "SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity "
                "WHERE application_name = 'committer-under-test' "
                "AND datname = current_database()"  # this worker's: the others run it too
            )
        finally:
            await admin.close()
        assert [row["done"] for row in terminated] == [True]
        async with asyncio.timeout(SAFETY_S):
            await leased.commit(_boundary())
    assert len(outage.waits) >= 1  # the pooled connection was dead: one wait, a new one
    assert await _written(h, run) == (1, 1)


async def test_a_commit_whose_reply_was_lost_is_not_written_twice(
    h: Harness, proxy: PgProxy, database_url: str
) -> None:
    run = await _claimed(h)
    outage = Outage()
    async with _committer(proxy.url(database_url), outage) as committer:
        leased = _leased(h, run, committer, outage)
        proxy.lose_next_commit_reply()
        async with asyncio.timeout(SAFETY_S):
            written = await leased.commit(_boundary())
    assert proxy.lost_commit_replies == 1
    assert len(outage.waits) >= 1
    assert written.id == run.id
    assert await _written(h, run) == (1, 1)  # the transaction's id said: it committed


async def test_a_write_whose_lease_was_taken_during_the_outage_writes_nothing(
    h: Harness, proxy: PgProxy, database_url: str
) -> None:
    run = await _claimed(h)
    outage = Outage()

    async def taken_over_then_back() -> None:
        # Meanwhile (on the database's side) the lease ran out, the reconciler timed the
        # run out and requeued it, and another worker claimed it.
        async with h.sessionmaker() as session, session.begin():
            await session.execute(
                text("UPDATE runs SET lease_expires_at = now() - interval '1 s' WHERE id = :id"),
                {"id": run.id},
            )
        await Reconciler(h.sessionmaker, h.bus, h.runs).run_once()
        await _claimed_again(h, run)
        proxy.restore()

    outage.on_wait[2] = taken_over_then_back
    async with _committer(proxy.url(database_url), outage) as committer:
        leased = _leased(h, run, committer, outage)
        proxy.refuse()
        async with asyncio.timeout(SAFETY_S):
            with pytest.raises(LeaseLost):
                await leased.commit(_boundary())
    assert await _written(h, run) == (0, 0)
    assert (await h.run(run.id)).lease_owner == "worker-2"


async def _claimed_again(h: Harness, run: RunRead) -> None:
    async with h.sessionmaker() as session, session.begin():
        (again,) = await run_transitions.claim(session, owner="worker-2", limit=1, ttl_s=TTL_S)
    assert again.id == run.id and again.lease_token > run.lease_token


async def test_past_the_leases_term_the_worker_gives_up_and_writes_nothing(
    h: Harness, proxy: PgProxy, database_url: str
) -> None:
    run = await _claimed(h)
    outage = Outage()
    async with _committer(proxy.url(database_url), outage) as committer:
        leased = _leased(h, run, committer, outage)
        proxy.refuse()  # and never back
        async with asyncio.timeout(SAFETY_S):
            with pytest.raises(LeaseLost):
                await leased.commit(_boundary())
        proxy.restore()
    assert sum(outage.waits) == pytest.approx(TTL_S)  # waited exactly out the term
    assert await _written(h, run) == (0, 0)


async def test_a_data_error_is_not_retried(h: Harness) -> None:
    outage = Outage()

    async def divide_by_zero(session: AsyncSession, items: list[int]) -> list[int]:
        await session.execute(text("SELECT 1 / 0"))
        return items

    ride_out = RideOut[int](until=lambda _: outage.now + 60, clock=outage.clock, sleep=outage.sleep)
    committer = GroupCommitter(h.sessionmaker, divide_by_zero, ride_out=ride_out)
    committer.start()
    try:
        with pytest.raises(DBAPIError) as refused:
            await committer.submit(1)
    finally:
        await committer.stop()
    assert not connection_lost(refused.value)
    assert outage.waits == []


class _Holding:
    """A run in a pool's hand whose loop only waits (the heartbeat is what is tested)."""

    def __init__(self, run: RunRead) -> None:
        self.run = run
        self.token = run.lease_token
        self.lease_lost = asyncio.Event()
        self.stop_requested = asyncio.Event()
        self.release = asyncio.Event()

    async def execute(self) -> None:
        await self.release.wait()


async def test_the_heartbeat_renews_once_the_database_is_back(
    h: Harness, proxy: PgProxy, database_url: str
) -> None:
    await h.start(await h.agent(say("done")))
    engine = make_engine(proxy.url(database_url), pool_size=1)
    now = [0.0]
    held: list[_Holding] = []
    terms: list[LeaseTerm] = []

    def hold(run: RunRead, owner: str, term: LeaseTerm) -> _Holding:
        held.append(_Holding(run))
        terms.append(term)
        return held[-1]

    pool = WorkerPool(
        make_sessionmaker(engine), h.bus, hold, lease_ttl_s=TTL_S, clock=lambda: now[0]
    )
    try:
        (run,) = await pool.claim()
        (term,) = terms
        assert term.held_until == TTL_S
        now[0] = 12.0
        proxy.refuse()
        renewing = asyncio.create_task(pool.renew())
        async with asyncio.timeout(SAFETY_S):
            await proxy.turned_away(2)  # it is trying again
            now[0] = 13.0
            proxy.restore()
            await renewing
        assert term.held_until == 13.0 + TTL_S  # from the renewal that got through
        assert not held[0].lease_lost.is_set()
        async with h.sessionmaker() as session:
            expires = await session.scalar(
                text("SELECT lease_expires_at - heartbeat_at FROM runs WHERE id = :id"),
                {"id": run.id},
            )
        assert expires is not None and expires.total_seconds() == TTL_S
    finally:
        for holding in held:
            holding.release.set()
        await pool.stop(grace_s=SAFETY_S)
        await engine.dispose()


def test_connection_classes() -> None:
    """What counts as a lost connection: the server gone or ending it, never a refusal of
    the statement."""
    assert connection_lost(ConnectionRefusedError(111, "refused"))
    assert connection_lost(asyncpg.AdminShutdownError("terminating connection"))
    assert connection_lost(asyncpg.ConnectionDoesNotExistError("closed mid-operation"))
    assert connection_lost(asyncpg.CannotConnectNowError("starting up"))
    assert not connection_lost(asyncpg.UniqueViolationError("duplicate key"))
    assert not connection_lost(asyncpg.DataError("invalid input"))
    assert not connection_lost(asyncpg.InterfaceError("another operation is in progress"))
    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = asyncpg.AdminShutdownError("terminating connection")
    assert connection_lost(wrapped)
