"""Aggregate counts over the runs table, for the metrics scrape and the dashboard's
overview."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import RunStatus
from app.runs.models import RUNS


async def count_by_status(session: AsyncSession) -> dict[RunStatus, int]:
    """How many runs are in each status, across every process; statuses with no runs are
    absent. One GROUP BY, answered from the index on `status`."""
    rows = await session.execute(select(RUNS.c.status, func.count()).group_by(RUNS.c.status))
    return {RunStatus(status): count for status, count in rows}


@dataclass(frozen=True)
class QueueState:
    """What the queue holds beyond its length: the queued runs not to start before a time
    still to come, since when the longest-waiting of the others has waited, and how many
    workers hold running runs (across every process)."""

    delayed: int
    waiting_since: datetime | None
    workers: int


async def queue_state(session: AsyncSession) -> QueueState:
    """One statement over the queued and running runs. A run waits from its creation or,
    when it was delayed (or is a retry's backoff), from its `not_before`."""
    queued = RUNS.c.status == RunStatus.QUEUED.value
    delayed = queued & (RUNS.c.not_before > func.now())
    ready = queued & or_(RUNS.c.not_before.is_(None), RUNS.c.not_before <= func.now())
    row = (
        await session.execute(
            select(
                func.count().filter(delayed),
                func.min(func.greatest(RUNS.c.created_at, RUNS.c.not_before)).filter(ready),
                func.count(RUNS.c.lease_owner.distinct()).filter(
                    RUNS.c.status == RunStatus.RUNNING.value
                ),
            ).where(RUNS.c.status.in_([RunStatus.QUEUED.value, RunStatus.RUNNING.value]))
        )
    ).one()
    return QueueState(delayed=row[0], waiting_since=row[1], workers=row[2])
