"""Aggregate counts over the runs table, for the metrics scrape."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import RunStatus
from app.models import RUNS


async def count_by_status(session: AsyncSession) -> dict[RunStatus, int]:
    """How many runs are in each status, across every process; statuses with no runs are
    absent. One GROUP BY, answered from the index on `status`."""
    rows = await session.execute(select(RUNS.c.status, func.count()).group_by(RUNS.c.status))
    return {RunStatus(status): count for status, count in rows}
