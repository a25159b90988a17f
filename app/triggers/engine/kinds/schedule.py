"""The schedule kind: fired by the scheduler (`engine/scheduler.py`) at the times of a
cron expression in a time zone, or every `interval_s` seconds; a fire's context holds its
`fire_time`. A schedule is armed (`next_fire_at`) while it is enabled, and its overlap
policy is its fire rule."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import ExecutionStatus, RunStatus
from app.core.vocabulary import Multitask, OverlapPolicy, TriggerKind
from app.runs.store import runs as run_store
from app.triggers.engine import schedule_times
from app.triggers.engine.fires import FirePath, FireResult, quietly
from app.triggers.engine.kinds.base import COMMON_ROOTS, Admission, Kind, Source, SourceParts
from app.triggers.engine.scheduler import Scheduler
from app.triggers.schemas import (
    ScheduleConfig,
    ScheduleTriggerCreate,
    ScheduleTriggerRead,
    TriggerRead,
)
from app.triggers.store import triggers as store
from app.workflows import store as workflow_store

# A run of these statuses has not finished (a schedule's overlap policy applies).
UNFINISHED = frozenset({RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING_ON_HUMAN})
_OVERLAP_MULTITASK = {
    OverlapPolicy.ENQUEUE: Multitask.ENQUEUE,
    OverlapPolicy.INTERRUPT: Multitask.INTERRUPT,
}


class ScheduleKind(Kind[ScheduleConfig]):
    name = TriggerKind.SCHEDULE.value
    config = ScheduleConfig
    create_shape = ScheduleTriggerCreate
    read_shape = ScheduleTriggerRead
    roots = COMMON_ROOTS | {"fire_time"}

    def check(self, config: ScheduleConfig, field: str) -> None:
        schedule_times.check(config)  # names `body.config.cron` / `.timezone`

    def next_fire_at(self, config: ScheduleConfig, enabled: bool, now: datetime) -> datetime | None:
        """Its first fire time after `now` while enabled (the schedule time math's next
        fire), else NULL: a disabled schedule is not armed."""
        return schedule_times.next_fire(config, now) if enabled else None

    def next_fire_times(
        self, config: ScheduleConfig, enabled: bool, now: datetime, count: int
    ) -> list[datetime]:
        return schedule_times.upcoming(config, now, count) if enabled else []

    async def admit(
        self, session: AsyncSession, trigger: TriggerRead, *, catching_up: bool
    ) -> Admission:
        """The overlap policy, while the run the previous fire started is not finished
        (queued, running, waiting on a person): `skip` records this fire skipped;
        `enqueue` puts the new run behind it on its lane; `interrupt` cancels it (at its
        next boundary) and takes its lane. For a workflow target, `skip` skips while the
        previous execution runs, and the other two start the new execution beside it. A
        fire `catching_up` enqueues (or starts beside) whatever the policy."""
        policy = OverlapPolicy.ENQUEUE if catching_up else self.config_of(trigger).overlap
        previous = await store.last_started_fire(session, trigger.id)
        if previous is None:
            return Admission()
        if previous.run_id is not None:
            run = await run_store.get_run(session, previous.run_id)
            if run is None or run.status not in UNFINISHED:
                return Admission()
            if policy is OverlapPolicy.SKIP:
                return Admission(skip=f"overlap: the previous fire's run {run.id} is {run.status}")
            return Admission(lane=run.lane, multitask=_OVERLAP_MULTITASK[policy])
        execution = await workflow_store.get_execution(session, previous.execution_id or "")
        if (
            policy is OverlapPolicy.SKIP
            and execution
            and execution.status is ExecutionStatus.RUNNING
        ):
            reason = f"overlap: the previous fire's execution {execution.id} is running"
            return Admission(skip=reason)
        return Admission()

    def source(self, parts: SourceParts) -> tuple[str, Source]:
        scheduler = Scheduler(
            parts.sessionmaker,
            ScheduleFire(parts.firing),
            interval_s=parts.settings.scheduler_interval_s,
            metrics=parts.metrics,
        )
        return "scheduler", scheduler


class ScheduleFire:
    """The scheduler's `Fire` over the fire path: the occasion is the fire time, the
    template context's `fire_time` too. A fire `catching_up` (a missed time after the first
    of a `run_all` pass) waits behind the previous fire's run whatever the overlap policy.
    None when the schedule was disabled or deleted since it was found due."""

    def __init__(self, firing: FirePath) -> None:
        self._firing = firing

    async def __call__(
        self, trigger_id: str, fire_time: datetime, fired_at: datetime, *, catching_up: bool = False
    ) -> FireResult | None:
        at = fire_time.astimezone(UTC)
        return await quietly(
            self._firing.fire(
                trigger_id,
                {"fire_time": at.isoformat()},
                fire_key=at.isoformat(),
                fired_at=fired_at,
                scheduled_for=at,
                catching_up=catching_up,
            )
        )


SCHEDULE = ScheduleKind()
