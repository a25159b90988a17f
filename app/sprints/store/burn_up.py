"""A sprint's burn-up, read from its backlog (when each task joined: `sprint_tasks.added_at`)
and the tasks' audit trail (when each completed: its transition to `completed`, which is
terminal, so a task completes once)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from itertools import accumulate

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import SprintStatus, TaskStatus
from app.sprints.models import SPRINT_TASKS
from app.sprints.schemas.burn_up import BurnUpPoint, SprintBurnUp
from app.sprints.schemas.sprints import SprintRead
from app.sprints.store import sprints as sprint_store
from app.tasks.models.tasks import TRANSITIONS

_LAST_INSTANT = timedelta(days=1) - timedelta(microseconds=1)  # Postgres keeps microseconds


@dataclass(frozen=True)
class BacklogEntry:
    """A task of the backlog: its points, when it joined, when it completed (None: not)."""

    story_points: int
    added_at: datetime
    completed_at: datetime | None


def days_of(sprint: SprintRead, now: datetime) -> list[tuple[date, datetime]]:
    """The days the burn-up shows, each with the moment it is counted up to (inclusive):
    its last instant (UTC), or `now` for today. A completed sprint ends on the day it
    completed if that came before `end_date` (on `start_date` at the earliest), and its
    last day is counted up to its completion."""
    limit = now
    last = min(sprint.end_date, now.astimezone(UTC).date())
    completed_at = sprint.completed_at if sprint.status is SprintStatus.COMPLETED else None
    if completed_at is not None:
        limit = completed_at
        on = completed_at.astimezone(UTC).date()
        last = max(sprint.start_date, min(sprint.end_date, on))
    days: list[tuple[date, datetime]] = []
    day = sprint.start_date
    while day <= last:
        days.append((day, min(datetime.combine(day, time(), UTC) + _LAST_INSTANT, limit)))
        day += timedelta(days=1)
    if completed_at is not None:
        days[-1] = (last, completed_at)
    return days


class _Cumulative:
    """Points summed over events in time order; `upto(t)` is the sum of those at or
    before `t`."""

    def __init__(self, events: Iterable[tuple[datetime, int]]) -> None:
        ordered = sorted(events)
        self._times = [at for at, _ in ordered]
        self._sums = [0, *accumulate(points for _, points in ordered)]

    def upto(self, at: datetime) -> int:
        return self._sums[bisect_right(self._times, at)]


def burn_up_of(sprint: SprintRead, backlog: list[BacklogEntry], now: datetime) -> SprintBurnUp:
    """The burn-up of `sprint` whose backlog is `backlog`, as of `now`."""
    scope = _Cumulative((e.added_at, e.story_points) for e in backlog)
    done = _Cumulative(
        (e.completed_at, e.story_points) for e in backlog if e.completed_at is not None
    )
    points = [
        BurnUpPoint(
            date=day, as_of=as_of, scope_points=scope.upto(as_of), completed_points=done.upto(as_of)
        )
        for day, as_of in days_of(sprint, now)
    ]
    if sprint.status is SprintStatus.COMPLETED and points:
        # Its velocity record, as the completing transaction read the tasks: a task that
        # completed in the same instant, or was deleted since, cannot make them disagree.
        points[-1] = points[-1].model_copy(
            update={
                "scope_points": sprint.committed_points,
                "completed_points": sprint.completed_points,
            }
        )
    return SprintBurnUp(
        sprint_id=sprint.id,
        project=sprint.project,
        status=sprint.status,
        start_date=sprint.start_date,
        end_date=sprint.end_date,
        committed_points=sprint.committed_points,
        completed_points=sprint.completed_points,
        points=points,
    )


async def backlog_of(session: AsyncSession, sprint_id: str) -> list[BacklogEntry]:
    """The sprint's tasks with their points, when they joined and when they completed."""
    completed = (
        select(func.min(TRANSITIONS.c.at))
        .where(
            TRANSITIONS.c.task_id == SPRINT_TASKS.c.task_id,
            TRANSITIONS.c.to_status == TaskStatus.COMPLETED.value,
        )
        .scalar_subquery()
    )
    rows = await session.execute(
        select(SPRINT_TASKS.c.story_points, SPRINT_TASKS.c.added_at, completed).where(
            SPRINT_TASKS.c.sprint_id == sprint_id
        )
    )
    return [BacklogEntry(*row) for row in rows]


async def burn_up(session: AsyncSession, sprint_id: str, now: datetime) -> SprintBurnUp | None:
    """The sprint's burn-up as of `now` (the service's clock); None without the sprint.
    Call `one_snapshot` first: the sprint and its backlog are read by two queries."""
    sprint = await sprint_store.get_sprint(session, sprint_id)
    if sprint is None:
        return None
    return burn_up_of(sprint, await backlog_of(session, sprint_id), now)
