"""The scheduler on the real database, through the real fire path, on an injected clock:
two schedulers firing one schedule at once make one run per fire time; each misfire
policy after a downtime; DST changes driven step by step; each overlap policy; a resumed
schedule does not fire what it passed while paused; one schedule that cannot fire does
not hold back the others; and the idle pass is an index lookup."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.core.vocabulary import FireStatus, Multitask
from app.db.connection import make_engine, make_sessionmaker
from app.events.engine.bus import EventBus
from app.runs.engine.runs import RunCommands
from app.runs.models import Run
from app.runs.schemas.runs import RunRead
from app.runs.store import runs as run_store
from app.tasks.engine.task_engine import TaskEngine
from app.telemetry.metrics import Metrics
from app.triggers.engine.firing import TriggerFiring
from app.triggers.engine.kinds.schedule import ScheduleFire
from app.triggers.engine.scheduler import Fire, Scheduler
from app.triggers.models import TriggerFire
from app.triggers.schemas import FireRead
from app.triggers.store import schedules
from app.triggers.store import triggers as store
from app.workflows.engine.workflows import WorkflowCommands
from tests.support.engine import ManualClock
from tests.telemetry.test_metrics import sample
from tests.triggers.test_trigger_firing import World, run_target

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
MISFIRES = "loopwright_schedule_misfires_total"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def world(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    engine: TaskEngine,
    clock: ManualClock,
) -> World:
    return World(sessionmaker, bus, engine, clock)


def scheduler_of(world: World) -> Scheduler:
    return Scheduler(
        world.sessionmaker, world.fire_schedule, clock=world.clock, metrics=world.metrics
    )


async def schedule(world: World, target: dict[str, Any] | None = None, **config: Any) -> str:
    """A schedule trigger, armed from the clock's time; its id."""
    target = target or run_target(await world.agent(), input="tick {{ fire_time }}")
    trigger = await world.trigger("schedule", config=config, target=target)
    return trigger.id


async def fires_of(world: World, trigger_id: str) -> list[FireRead]:
    """The fire log, oldest first."""
    async with world.sessionmaker() as session:
        fires = await store.list_fires(session, trigger_id, before_id=None, limit=1000)
    return fires[::-1]


async def runs_of(world: World, fires: list[FireRead]) -> list[RunRead]:
    runs = []
    async with world.sessionmaker() as session:
        for fire in fires:
            if fire.run_id is not None:
                run = await run_store.get_run(session, fire.run_id)
                assert run is not None
                runs.append(run)
    return runs


async def armed(world: World, trigger_id: str) -> datetime | None:
    async with world.sessionmaker() as session:
        trigger = await store.get_trigger(session, trigger_id)
    assert trigger is not None
    return trigger.next_fire_at


def fire_times(runs: list[RunRead]) -> list[datetime]:
    """Each run's `metadata.trigger.fire_time`, as it was written."""
    return [datetime.fromisoformat(r.metadata["trigger"]["fire_time"]) for r in runs]


def hours(*offsets: int) -> list[datetime]:
    return [NOW + timedelta(hours=h) for h in offsets]


# -- two processes --------------------------------------------------------------------


class Process:
    """What one process has of its own: an engine (its pool of connections), its fire path
    and its scheduler, on the shared database and the shared injected moment."""

    def __init__(self, db: AsyncEngine, clock: ManualClock) -> None:
        self.db = db
        sessions = make_sessionmaker(db)
        bus = EventBus()
        runs = RunCommands(sessions, bus, clock=clock)
        workflows = WorkflowCommands(sessions, bus, TaskEngine(sessions, bus), clock=clock)
        self.metrics = Metrics()
        firing = TriggerFiring(sessions, bus, runs, workflows, clock=clock, metrics=self.metrics)
        self.scheduler = Scheduler(
            sessions, ScheduleFire(firing), clock=clock, metrics=self.metrics
        )


@pytest.fixture
async def processes(
    database_url: str, clean_db: AsyncEngine, clock: ManualClock
) -> AsyncIterator[list[Process]]:
    both = [Process(make_engine(database_url), clock) for _ in range(2)]
    yield both
    for process in both:
        await process.db.dispose()


async def test_two_processes_firing_one_schedule_make_one_run_per_fire_time(
    world: World, processes: list[Process], clock: ManualClock
) -> None:
    # Every fire time starts a run (enqueue), so a doubled fire would be a second run.
    trigger_id = await schedule(
        world, interval_s=60, misfire="run_all", max_catchup=5, overlap="enqueue"
    )
    expected: list[datetime] = []
    both_fired = 0

    for round_ in range(8):
        due = await armed(world, trigger_id)
        assert due is not None
        clock.now = due + timedelta(seconds=round_ * 5)  # on time: within the grace period
        fired = await asyncio.gather(*(p.scheduler.run_once() for p in processes))
        expected.append(due)
        both_fired += all(fired)

        fires = await fires_of(world, trigger_id)
        assert [f.scheduled_for for f in fires] == expected
        assert [f.status for f in fires] == [FireStatus.STARTED] * len(expected)
        assert fire_times(await runs_of(world, fires)) == expected
        assert await world.count(Run) == await world.count(TriggerFire) == len(expected)
        assert await armed(world, trigger_id) == due + timedelta(minutes=1)  # moved on once

    # Both down for a while, then both up at once: eight fire times passed, the newest five
    # are fired (once each), the three left out are counted once across the two.
    last = expected[-1]
    clock.now = last + timedelta(minutes=8, seconds=10)
    await asyncio.gather(*(p.scheduler.run_once() for p in processes))
    caught_up = [last + timedelta(minutes=m) for m in range(4, 9)]
    fires = await fires_of(world, trigger_id)
    assert [f.scheduled_for for f in fires] == expected + caught_up
    assert fire_times(await runs_of(world, fires)) == expected + caught_up
    assert await world.count(Run) == len(expected) + 5
    assert await armed(world, trigger_id) == last + timedelta(minutes=9)
    assert sum(sample(p.metrics, MISFIRES) or 0 for p in processes) == 3
    # The two did race: in some rounds both found the schedule due and fired its time.
    assert both_fired > 0


# -- misfire policies -------------------------------------------------------------------


async def test_misfire_skip_fires_nothing_missed_and_arms_the_next_time(world: World) -> None:
    trigger_id = await schedule(world, interval_s=3600, misfire="skip")
    assert await armed(world, trigger_id) == NOW + timedelta(hours=1)
    scheduler = scheduler_of(world)

    world.clock.now = NOW + timedelta(hours=6, minutes=10)  # down from 12:30 to 18:10
    assert await scheduler.run_once() == 0

    assert await fires_of(world, trigger_id) == [] and await world.count(Run) == 0
    assert await armed(world, trigger_id) == NOW + timedelta(hours=7)
    assert sample(world.metrics, MISFIRES) == 6  # 13:00 … 18:00
    # Once up again, a fire on time fires (a few seconds late is still on time).
    world.clock.now = NOW + timedelta(hours=7, seconds=30)
    assert await scheduler.run_once() == 1
    (fire,) = await fires_of(world, trigger_id)
    assert fire.scheduled_for == NOW + timedelta(hours=7) and fire.status is FireStatus.STARTED
    assert fire_times(await runs_of(world, [fire])) == hours(7)


async def test_misfire_run_once_fires_the_latest_missed_time(world: World) -> None:
    trigger_id = await schedule(world, interval_s=3600, misfire="run_once")
    scheduler = scheduler_of(world)

    world.clock.now = NOW + timedelta(hours=6, minutes=10)
    assert await scheduler.run_once() == 1
    assert await scheduler.run_once() == 0  # and only once

    fires = await fires_of(world, trigger_id)
    assert [f.scheduled_for for f in fires] == hours(6)
    (run,) = await runs_of(world, fires)
    assert fire_times([run]) == hours(6) and run.input == f"tick {hours(6)[0].isoformat()}"
    assert fires[0].fired_at == world.clock.now  # fired late, for its own time
    assert await armed(world, trigger_id) == NOW + timedelta(hours=7)
    assert sample(world.metrics, MISFIRES) == 5


async def test_misfire_run_all_fires_each_missed_time_oldest_first_up_to_max_catchup(
    world: World,
) -> None:
    trigger_id = await schedule(
        world, interval_s=3600, misfire="run_all", max_catchup=3, overlap="enqueue"
    )
    scheduler = scheduler_of(world)

    world.clock.now = NOW + timedelta(hours=6, minutes=10)
    assert await scheduler.run_once() == 3

    fires = await fires_of(world, trigger_id)
    assert [f.scheduled_for for f in fires] == hours(4, 5, 6)
    runs = await runs_of(world, fires)
    assert fire_times(runs) == hours(4, 5, 6)
    assert [r.created_at for r in runs] == [world.clock.now] * 3
    assert len({r.lane for r in runs}) == 1  # each behind the one before (enqueue)
    assert await armed(world, trigger_id) == NOW + timedelta(hours=7)
    assert sample(world.metrics, MISFIRES) == 3  # 13:00, 14:00 and 15:00 left out

    # Fewer missed than the bound: each one.
    world.clock.now = NOW + timedelta(hours=8, minutes=59)
    assert await scheduler.run_once() == 2
    assert [f.scheduled_for for f in await fires_of(world, trigger_id)] == hours(4, 5, 6, 7, 8)
    assert sample(world.metrics, MISFIRES) == 3


async def test_run_all_under_overlap_skip_runs_each_missed_time_one_after_another(
    world: World,
) -> None:
    """`run_all` asks for every missed time to run: fired in one pass, each waits behind
    the run of the one before it on its lane, whatever the overlap policy. The policy
    holds again for the next fire on time, while those runs are unfinished."""
    trigger_id = await schedule(world, interval_s=3600, misfire="run_all", overlap="skip")

    world.clock.now = NOW + timedelta(hours=3, minutes=10)
    assert await scheduler_of(world).run_once() == 3

    fires = await fires_of(world, trigger_id)
    assert [f.scheduled_for for f in fires] == hours(1, 2, 3)
    assert [f.status for f in fires] == [FireStatus.STARTED] * 3
    runs = await runs_of(world, fires)
    assert len({r.lane for r in runs}) == 1  # one lane: they run in order, never at once

    world.clock.now = NOW + timedelta(hours=4)
    assert await scheduler_of(world).run_once() == 1
    on_time = (await fires_of(world, trigger_id))[-1]
    assert on_time.status is FireStatus.SKIPPED
    assert (on_time.error or "").startswith("overlap: the previous fire's run")


# -- daylight saving time ---------------------------------------------------------------


def local(zone: str, *moments: tuple[int, int, int, int, int]) -> list[datetime]:
    return [datetime(*m, tzinfo=ZoneInfo(zone)).astimezone(UTC) for m in moments]


BERLIN_SPRING = local(
    "Europe/Berlin", (2026, 3, 28, 2, 30), (2026, 3, 29, 3, 0), (2026, 3, 30, 2, 30)
)
BERLIN_AUTUMN = local(
    "Europe/Berlin", (2026, 10, 24, 2, 30), (2026, 10, 25, 2, 30), (2026, 10, 26, 2, 30)
)
# New York's autumn day, 1 November 2026: 00:00 EDT (04:00 UTC) to 00:00 EST (05:00 UTC).
NEW_YORK_AUTUMN = [datetime(2026, 11, 1, 4, tzinfo=UTC) + timedelta(hours=h) for h in range(25)]


@pytest.mark.parametrize(
    ("cron", "zone", "start", "end", "expected"),
    [
        # 02:30 does not exist on the 29th: it fires once, at 03:00 CEST (01:00 UTC).
        (
            "30 2 * * *",
            "Europe/Berlin",
            datetime(2026, 3, 27, 12, tzinfo=UTC),
            datetime(2026, 3, 30, 12, tzinfo=UTC),
            BERLIN_SPRING,
        ),
        # 02:30 happens twice on 25 October: it fires once, on the first (CEST, 00:30 UTC).
        (
            "30 2 * * *",
            "Europe/Berlin",
            datetime(2026, 10, 23, 12, tzinfo=UTC),
            datetime(2026, 10, 26, 12, tzinfo=UTC),
            BERLIN_AUTUMN,
        ),
        # Every real hour of the 25-hour day: 01:00 EDT and 01:00 EST both fire.
        (
            "0 * * * *",
            "America/New_York",
            datetime(2026, 11, 1, 3, 30, tzinfo=UTC),
            datetime(2026, 11, 2, 4, 30, tzinfo=UTC),
            NEW_YORK_AUTUMN,
        ),
    ],
)
async def test_dst_changes_through_the_scheduler(
    world: World,
    cron: str,
    zone: str,
    start: datetime,
    end: datetime,
    expected: list[datetime],
) -> None:
    world.clock.now = start
    trigger_id = await schedule(
        world, target=None, cron=cron, timezone=zone, misfire="skip", overlap="enqueue"
    )
    scheduler = scheduler_of(world)

    while world.clock.now < end:  # a pass every ten minutes, as a scheduler would look
        world.clock.advance(minutes=10)
        await scheduler.run_once()

    fires = await fires_of(world, trigger_id)
    assert [f.scheduled_for for f in fires] == expected
    assert all(f.fired_at == f.scheduled_for for f in fires)  # each on time, none missed
    assert fire_times(await runs_of(world, fires)) == expected
    assert sample(world.metrics, MISFIRES) == 0
    if zone == "America/New_York":
        hours_local = [t.astimezone(ZoneInfo(zone)) for t in expected]
        assert [t.hour for t in hours_local[:3]] == [0, 1, 1]
        assert [t.utcoffset() for t in hours_local[1:3]] == [
            timedelta(hours=-4),
            timedelta(hours=-5),
        ]


# -- overlap policies ---------------------------------------------------------------------


async def test_overlap_policies_through_the_scheduler(world: World) -> None:
    agent_id = await world.agent()
    target = run_target(agent_id, input="tick {{ fire_time }}")
    skip, enqueue, interrupt = [
        await schedule(world, target, interval_s=60, overlap=policy)
        for policy in ("skip", "enqueue", "interrupt")
    ]
    scheduler = scheduler_of(world)
    first, second = NOW + timedelta(minutes=1), NOW + timedelta(minutes=2)

    world.clock.now = first
    assert await scheduler.run_once() == 3  # each starts a run; none runs (no workers)
    world.clock.now = second
    assert await scheduler.run_once() == 3  # each while the run of the first is queued

    skipped = await fires_of(world, skip)
    assert [f.status for f in skipped] == [FireStatus.STARTED, FireStatus.SKIPPED]
    (held,) = await runs_of(world, skipped)
    assert skipped[1].error == f"overlap: the previous fire's run {held.id} is queued"
    assert skipped[1].scheduled_for == second

    before, behind = await runs_of(world, await fires_of(world, enqueue))
    assert behind.lane == before.lane and behind.multitask is Multitask.ENQUEUE
    assert before.status == behind.status == "queued"

    cut, taker = await runs_of(world, await fires_of(world, interrupt))
    assert taker.lane == cut.lane and taker.multitask is Multitask.INTERRUPT
    assert cut.status == "cancelled" and fire_times([cut, taker]) == [first, second]

    # Once the previous run has finished, a skip schedule starts runs again.
    await world.runs.cancel(held.id)
    world.clock.now = NOW + timedelta(minutes=3)
    await scheduler.run_once()
    assert (await fires_of(world, skip))[-1].status is FireStatus.STARTED


# -- pause and resume ---------------------------------------------------------------------


async def test_a_resumed_schedule_does_not_fire_the_times_it_passed_while_paused(
    world: World,
) -> None:
    # run_all: even the policy that fires every missed time does not fire a paused one.
    trigger_id = await schedule(world, interval_s=3600, misfire="run_all", overlap="enqueue")
    scheduler = scheduler_of(world)
    world.clock.now = NOW + timedelta(hours=1)
    assert await scheduler.run_once() == 1

    world.clock.now = NOW + timedelta(hours=1, minutes=20)
    paused = await world.triggers.set_enabled(trigger_id, False, expected_version=None)
    assert paused.next_fire_at is None
    for hour in range(2, 7):  # the scheduler keeps looking; the paused schedule is not due
        world.clock.now = NOW + timedelta(hours=hour)
        assert await scheduler.run_once() == 0

    world.clock.now = NOW + timedelta(hours=6, minutes=30)
    resumed = await world.triggers.set_enabled(trigger_id, True, expected_version=None)
    assert resumed.next_fire_at == NOW + timedelta(hours=7)
    assert await scheduler.run_once() == 0
    world.clock.now = NOW + timedelta(hours=7)
    assert await scheduler.run_once() == 1

    fires = await fires_of(world, trigger_id)
    assert [f.scheduled_for for f in fires] == hours(1, 7)  # 14:00 … 18:00 never fired
    assert fire_times(await runs_of(world, fires)) == hours(1, 7)
    assert sample(world.metrics, MISFIRES) == 0  # nothing was missed: it was paused


async def test_a_schedule_disabled_after_it_was_found_due_does_not_fire(
    world: World,
) -> None:
    trigger_id = await schedule(world, interval_s=60)

    async def pause_first(
        trigger_id: str, fire_time: datetime, fired_at: datetime, *, catching_up: bool
    ) -> object:
        await world.triggers.set_enabled(trigger_id, False, expected_version=None)
        return await world.fire_schedule(trigger_id, fire_time, fired_at, catching_up=catching_up)

    scheduler = Scheduler(world.sessionmaker, pause_first, clock=world.clock)
    world.clock.now = NOW + timedelta(minutes=1)
    await scheduler.run_once()

    assert await fires_of(world, trigger_id) == []
    assert await armed(world, trigger_id) is None  # the pass did not arm it again


# -- a schedule that cannot fire, and the idle pass --------------------------------------------


async def test_a_schedule_that_cannot_fire_does_not_hold_back_the_others(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    broken = await schedule(world, interval_s=60)
    world.clock.advance(seconds=30)  # armed later: `broken` is the most overdue
    fine = await schedule(world, interval_s=120)
    failures: list[BaseException] = [RuntimeError("a bug"), OSError("the database is away")]

    def failing_for(broken_id: str) -> Fire:
        async def fire(
            trigger_id: str, fire_time: datetime, fired_at: datetime, *, catching_up: bool
        ) -> object:
            if trigger_id == broken_id:
                raise failures[0]
            return await world.fire_schedule(
                trigger_id, fire_time, fired_at, catching_up=catching_up
            )

        return fire

    scheduler = Scheduler(world.sessionmaker, failing_for(broken), clock=world.clock)
    world.clock.now = NOW + timedelta(minutes=2)
    with caplog.at_level(logging.ERROR, logger="app.triggers.engine.scheduler"):
        assert await scheduler.run_once() == 1

    assert f"schedule {broken} did not fire" in caplog.text
    assert await armed(world, broken) == NOW + timedelta(minutes=1)  # still due: tried again
    assert [f.scheduled_for for f in await fires_of(world, fine)] == [NOW + timedelta(minutes=2)]
    # The database away is not one schedule's fault: the pass ends (its loop logs it).
    failures.pop(0)
    with pytest.raises(OSError, match="the database is away"):
        await scheduler.run_once()


async def test_the_idle_pass_is_a_lookup_on_the_partial_index(world: World) -> None:
    async with world.sessionmaker() as session, session.begin():
        # Thousands of triggers that are not armed, a few that are: the index holds these.
        await session.execute(
            text(
                "INSERT INTO triggers (id, name, description, kind, enabled, target, config,"
                " version, created_at, updated_at, next_fire_at)"
                " SELECT 'trg_' || i, 't', '', CASE WHEN i % 1000 = 0 THEN 'schedule'"
                " ELSE 'webhook' END, true, '{}', '{}', 1, now(), now(),"
                " CASE WHEN i % 1000 = 0 THEN CAST(:at AS timestamptz) END"
                " FROM generate_series(1, 20000) AS i"
            ),
            {"at": NOW + timedelta(hours=1)},
        )
    async with world.sessionmaker() as session:
        await session.execute(text("ANALYZE triggers"))
        statement = schedules.due_statement(NOW, limit=100)
        sql = str(statement.compile(dialect=session.get_bind().dialect))
        await session.execute(text(f"PREPARE due_probe AS {sql}"))
        plans: list[str] = []
        for mode in ("force_custom_plan", "force_generic_plan"):  # asyncpg prepares it
            await session.execute(text(f"SET plan_cache_mode = {mode}"))
            lines = await session.execute(
                text(f"EXPLAIN EXECUTE due_probe('{NOW.isoformat()}', 100)")
            )
            plans.append("\n".join(line[0] for line in lines))
        assert await schedules.due(session, NOW + timedelta(hours=2), limit=100) != []

    for plan in plans:
        assert "Index Scan using ix_triggers_next_fire_at on triggers" in plan, plan
        assert "Seq Scan" not in plan, plan
