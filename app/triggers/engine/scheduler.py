"""The scheduler: on each tick, fire the schedules whose next fire time has passed, then
move their next fire time on.

A pass holds no lock while it fires. For each due schedule it asks `schedule_times.due()`
which fire times to fire under the misfire policy, fires each (through the fire path,
whose key is the trigger and the fire time: the database makes one fire of each time,
however many schedulers try), and only then moves `next_fire_at` on, compare-and-set. A
crash between the fires and the move makes the next pass fire the same times again, which
the keys turn into the fires already made; so a fire time is never lost and never doubled,
and several processes may run schedulers side by side. The misfires a plan leaves out are
counted by the scheduler whose move wins, so a fleet counts each once.

One schedule whose fire fails (other than the database being away, which ends the pass)
is logged and left due, and the pass goes on with the others: the most overdue schedule
comes first in every pass, and must not hold the rest back.

Idle, a pass is one query on the partial index `ix_triggers_next_fire_at` (only armed
schedules are in it) every `interval_s`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.errors import is_connectivity_error
from app.runtime.components import Loop, Wakes
from app.telemetry.metrics import Metrics
from app.triggers.engine import schedule_times
from app.triggers.schemas import ScheduleConfig
from app.triggers.store import schedules

log = logging.getLogger(__name__)


# fire(trigger_id, fire_time, fired_at): start the schedule's target for that fire time.
class Fire(Protocol):
    """Start the schedule's target for one fire time. `catching_up`: a missed time after
    the first of one pass (`run_all`), which waits behind the one before it on its lane
    whatever the overlap policy: the misfire policy asked for each of them to run."""

    async def __call__(
        self, trigger_id: str, fire_time: datetime, fired_at: datetime, *, catching_up: bool
    ) -> object: ...


class Scheduler:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        fire: Fire,
        *,
        interval_s: float = 1.0,
        batch: int = 100,
        grace_s: float = schedule_times.DEFAULT_GRACE_S,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        metrics: Metrics | None = None,
    ) -> None:
        if interval_s >= grace_s:
            raise ValueError("the scheduler must look more often than a fire's grace period")
        self._sessionmaker = sessionmaker
        self._fire = fire
        self._batch = batch
        self._grace_s = grace_s
        self._clock = clock
        self._metrics = metrics
        self.loop = Loop("scheduler", self.run_once, Wakes(interval_s), sleep=sleep, clock=clock)

    def start(self) -> None:
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.stop()

    async def run_once(self) -> int:
        """Fire what is due now; the number of fire times fired."""
        now = self._clock()
        async with self._sessionmaker() as session:
            due = await schedules.due(session, now, limit=self._batch)
        fired = 0
        for schedule in due:
            try:
                fired += await self._fire_due(schedule, now)
            except Exception as exc:
                if is_connectivity_error(exc):
                    raise
                log.exception(
                    "schedule %s did not fire; the next pass tries again",
                    schedule.id,
                    extra={"fields": {"trigger_id": schedule.id}},
                )
        return fired

    async def _fire_due(self, schedule: schedules.DueSchedule, now: datetime) -> int:
        config = ScheduleConfig.model_validate(schedule.config)
        plan = schedule_times.due(config, schedule.next_fire_at, now, grace_s=self._grace_s)
        for i, fire_time in enumerate(plan.fire_times):
            await self._fire(schedule.id, fire_time, now, catching_up=i > 0)
        async with self._sessionmaker() as session, session.begin():
            moved = await schedules.move_on(
                session, schedule.id, was=schedule.next_fire_at, to=plan.next_fire_at
            )
        if moved and plan.skipped and self._metrics is not None:
            self._metrics.schedule_misfires.inc(plan.skipped)
        return len(plan.fire_times)
