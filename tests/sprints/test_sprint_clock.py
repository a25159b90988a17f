"""The sprint clock on the real database, through the real `SprintCommands`, on an injected
clock: an active clocked sprint moves to in_review once the day after its end date begins
(UTC), with one event naming the clock; a sprint on its last day, one not clocked, one
planned and one a person moved stay as they are; two clocks racing move a sprint once; a
person's move between the clock's read and its move wins; and the clock sleeps until the
next end date when that comes before its interval."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.core.states import SprintStatus
from app.core.streams import SPRINTS_STREAM
from app.db.connection import make_engine, make_sessionmaker
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.sprints.engine.sprint_clock import CLOCK_ACTOR, ClockPass, SprintClock
from app.sprints.engine.sprints import SprintCommands
from app.sprints.schemas.sprints import SprintCreate, SprintPatch, SprintRead
from app.sprints.store import sprints as store
from app.telemetry.metrics import Metrics
from tests.support.engine import ManualClock
from tests.telemetry.test_metrics import sample

S = SprintStatus
END = date(2026, 12, 14)
LAST_SECOND = datetime(2026, 12, 14, 23, 59, 59, tzinfo=UTC)
DAY_AFTER = datetime(2026, 12, 15, tzinfo=UTC)
MOVED = "loopwright_sprints_auto_transitioned_total"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 12, 1, 9, tzinfo=UTC))


@pytest.fixture
def sessionmaker(clean_db: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return make_sessionmaker(clean_db)


@pytest.fixture
def sprints(sessionmaker: async_sessionmaker[AsyncSession], clock: ManualClock) -> SprintCommands:
    return SprintCommands(sessionmaker, EventBus(), clock=clock)


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def sprint_clock(
    sessionmaker: async_sessionmaker[AsyncSession],
    sprints: SprintCommands,
    clock: ManualClock,
    metrics: Metrics,
) -> SprintClock:
    return SprintClock(sessionmaker, sprints, clock=clock, metrics=metrics)


async def sprint(
    sprints: SprintCommands,
    project: str,
    *,
    end: date = END,
    auto: bool = True,
    to: tuple[SprintStatus, ...] = (S.ACTIVE,),
) -> SprintRead:
    """A sprint of `project` from Dec 1 to `end`, moved by a person through `to`."""
    body = SprintCreate(
        project=project,
        name=f"{project} sprint",
        start_date=date(2026, 12, 1),
        end_date=end,
        auto_transition=auto,
    )
    made, _ = await sprints.create_keyed(body, "ann")
    for status in to:
        made = await sprints.transition(made.id, status, "ann", expected_version=None)
    return made


async def read(sessionmaker: async_sessionmaker[AsyncSession], sprint_id: str) -> SprintRead:
    async with sessionmaker() as session:
        found = await store.get_sprint(session, sprint_id)
    assert found is not None
    return found


async def moves(
    sessionmaker: async_sessionmaker[AsyncSession], sprint_id: str
) -> list[tuple[str, str, str]]:
    """(from, to, actor) of each `sprint.transitioned` event of the sprint, oldest first."""
    async with sessionmaker() as session:
        events = await event_store.read_events(session, SPRINTS_STREAM, after=0, limit=1000)
    return [
        (e.data["from"], e.data["to"], e.data["actor"])
        for e in events
        if e.type == "sprint.transitioned" and e.data["sprint"]["id"] == sprint_id
    ]


async def test_an_active_clocked_sprint_moves_to_in_review_once_its_last_day_is_over(
    sessionmaker: async_sessionmaker[AsyncSession],
    sprints: SprintCommands,
    sprint_clock: SprintClock,
    clock: ManualClock,
    metrics: Metrics,
) -> None:
    active = await sprint(sprints, "atlas")
    assert active.auto_transition and active.version == 2

    # Its last day is included, in UTC: 00:30 on the 15th in Paris is still the 14th.
    for now in (LAST_SECOND, datetime(2026, 12, 15, 0, 30, tzinfo=timezone(timedelta(hours=1)))):
        clock.now = now
        assert await sprint_clock.run_once() == ClockPass([], DAY_AFTER)
        assert (await read(sessionmaker, active.id)).status is S.ACTIVE

    clock.now = DAY_AFTER
    assert await sprint_clock.run_once() == ClockPass([active.id], None)
    moved = await read(sessionmaker, active.id)
    assert (moved.status, moved.version) == (S.IN_REVIEW, 3)
    assert await moves(sessionmaker, active.id) == [
        ("planning", "active", "ann"),
        ("active", "in_review", CLOCK_ACTOR),
    ]
    assert sample(metrics, MOVED) == 1

    # Nothing cycles on by itself: in review, the clock leaves it.
    clock.advance(days=30)
    assert await sprint_clock.run_once() == ClockPass([], None)
    assert (await read(sessionmaker, active.id)).version == 3
    assert sample(metrics, MOVED) == 1


async def test_the_clock_leaves_alone_what_it_does_not_own(
    sessionmaker: async_sessionmaker[AsyncSession],
    sprints: SprintCommands,
    sprint_clock: SprintClock,
    clock: ManualClock,
    metrics: Metrics,
) -> None:
    unclocked = await sprint(sprints, "atlas", auto=False)
    planned = await sprint(sprints, "atlas", to=())
    last_day = await sprint(sprints, "borealis", end=date(2026, 12, 20))
    by_hand = await sprint(sprints, "cygnus", to=(S.ACTIVE, S.IN_REVIEW))
    left = [unclocked, planned, last_day, by_hand]

    clock.now = datetime(2026, 12, 20, 18, tzinfo=UTC)
    assert await sprint_clock.run_once() == ClockPass([], datetime(2026, 12, 21, tzinfo=UTC))
    assert [await read(sessionmaker, s.id) for s in left] == left
    assert sample(metrics, MOVED) == 0

    # Switched on mid-sprint, a sprint past its end moves at the next pass.
    switched = await sprints.update(
        unclocked.id, SprintPatch(auto_transition=True), "ann", expected_version=2
    )
    assert switched.auto_transition and switched.version == 3
    clock.now = datetime(2026, 12, 21, tzinfo=UTC)
    passed = await sprint_clock.run_once()
    assert sorted(passed.moved) == sorted([unclocked.id, last_day.id])
    assert (await read(sessionmaker, planned.id)).status is S.PLANNING
    assert await moves(sessionmaker, by_hand.id) == [
        ("planning", "active", "ann"),
        ("active", "in_review", "ann"),
    ]


class HeldCommands(SprintCommands):
    """Sprint commands whose moves first await `hold()`: a test lets a clock read its due
    sprints, and then has something happen before the clock moves one."""

    def __init__(self, *args: Any, hold: Callable[[], Awaitable[object]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hold = hold

    async def transition(
        self, sprint_id: str, to: SprintStatus, actor: str, *, expected_version: int | None
    ) -> SprintRead:
        await self.hold()
        return await super().transition(sprint_id, to, actor, expected_version=expected_version)


class Process:
    """One process of its own: an engine (its pool), its commands, clock component and
    metrics, on the shared database and the shared injected moment."""

    def __init__(
        self, db: AsyncEngine, clock: ManualClock, hold: Callable[[], Awaitable[object]]
    ) -> None:
        self.db = db
        sessions = make_sessionmaker(db)
        commands = HeldCommands(sessions, EventBus(), clock=clock, hold=hold)
        self.metrics = Metrics()
        self.clock = SprintClock(sessions, commands, clock=clock, metrics=self.metrics)


@pytest.fixture
async def open_process(
    database_url: str, clean_db: AsyncEngine, clock: ManualClock
) -> AsyncIterator[Callable[[Callable[[], Awaitable[object]]], Process]]:
    opened: list[Process] = []

    def open_one(hold: Callable[[], Awaitable[object]]) -> Process:
        opened.append(Process(make_engine(database_url), clock, hold))
        return opened[-1]

    yield open_one
    for process in opened:
        await process.db.dispose()


async def test_two_clocks_racing_move_a_sprint_once(
    sessionmaker: async_sessionmaker[AsyncSession],
    sprints: SprintCommands,
    open_process: Callable[[Callable[[], Awaitable[object]]], Process],
    clock: ManualClock,
) -> None:
    racing = [await sprint(sprints, project) for project in ("atlas", "borealis", "cygnus")]
    # Each clock moves a sprint only once both have read: both see all three due.
    barrier = asyncio.Barrier(2)
    processes = [open_process(barrier.wait) for _ in range(2)]
    clock.now = DAY_AFTER
    async with asyncio.timeout(30):
        passes = await asyncio.gather(*(p.clock.run_once() for p in processes))

    moved = [sprint_id for one in passes for sprint_id in one.moved]
    assert sorted(moved) == sorted(s.id for s in racing)  # each once, by one clock or the other
    for each in racing:
        assert (await read(sessionmaker, each.id)).version == 3
        assert (await moves(sessionmaker, each.id))[1:] == [("active", "in_review", CLOCK_ACTOR)]
    assert sum(sample(p.metrics, MOVED) or 0 for p in processes) == 3


async def test_a_person_moving_the_sprint_after_the_clock_read_it_wins(
    sessionmaker: async_sessionmaker[AsyncSession],
    sprints: SprintCommands,
    open_process: Callable[[Callable[[], Awaitable[object]]], Process],
    clock: ManualClock,
) -> None:
    active = await sprint(sprints, "atlas")
    arrived, go = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        arrived.set()
        await go.wait()

    held = open_process(hold)
    clock.now = DAY_AFTER
    async with asyncio.timeout(30):
        passing = asyncio.create_task(held.clock.run_once())
        await arrived.wait()  # the clock read the sprint as due; the person moves it first
        await sprints.transition(active.id, S.IN_REVIEW, "ann", expected_version=2)
        await sprints.transition(active.id, S.RETROSPECTIVE, "ann", expected_version=3)
        go.set()
        assert await passing == ClockPass([], None)

    assert (await read(sessionmaker, active.id)).status is S.RETROSPECTIVE
    assert [actor for _, _, actor in await moves(sessionmaker, active.id)] == ["ann"] * 3
    assert sample(held.metrics, MOVED) == 0


async def test_the_clock_sleeps_until_the_next_end_date_or_its_interval(
    sessionmaker: async_sessionmaker[AsyncSession],
    sprints: SprintCommands,
    clock: ManualClock,
) -> None:
    slept: asyncio.Queue[float] = asyncio.Queue()

    async def sleep(seconds: float) -> None:
        await slept.put(seconds)
        await asyncio.Event().wait()  # the test stops the clock; nothing wakes it

    async def first_sleep() -> float:
        component = SprintClock(sessionmaker, sprints, interval_s=600, clock=clock, sleep=sleep)
        component.start()
        try:
            async with asyncio.timeout(30):
                return await slept.get()
        finally:
            await component.stop()

    assert await first_sleep() == 600  # no clocked sprint: its interval
    await sprint(sprints, "atlas")
    clock.now = LAST_SECOND - timedelta(seconds=59)
    assert await first_sleep() == 60  # the end of the sprint's last day comes first
    clock.now = datetime(2026, 12, 14, 12, tzinfo=UTC)
    assert await first_sleep() == 600
