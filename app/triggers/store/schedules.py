"""The scheduler's SQL: the schedules whose next fire time has passed, and moving a
schedule's next fire time on (compare-and-set, so two schedulers never move it twice)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.triggers.models import TRIGGERS


@dataclass(frozen=True)
class DueSchedule:
    id: str
    config: dict[str, Any]
    next_fire_at: datetime


def due_statement(now: datetime, *, limit: int) -> Select[tuple[str, dict[str, Any], datetime]]:
    """The scheduler's query: a range scan of the partial index `ix_triggers_next_fire_at`
    (`next_fire_at <= now` implies the index's `next_fire_at IS NOT NULL`), which holds the
    armed schedules only, so an idle pass reads nothing else."""
    return (
        select(TRIGGERS.c.id, TRIGGERS.c.config, TRIGGERS.c.next_fire_at)
        .where(TRIGGERS.c.next_fire_at <= now)
        .order_by(TRIGGERS.c.next_fire_at)
        .limit(limit)
    )


async def due(session: AsyncSession, now: datetime, *, limit: int) -> list[DueSchedule]:
    """Enabled schedules whose next fire time is at or before `now`, most overdue first
    (only enabled schedules have one: disabling clears it)."""
    rows = await session.execute(due_statement(now, limit=limit))
    return [DueSchedule(r.id, r.config, r.next_fire_at) for r in rows]


async def move_on(session: AsyncSession, trigger_id: str, *, was: datetime, to: datetime) -> bool:
    """Set the next fire time to `to` if it still is `was`; False when another scheduler
    (or an edit, a pause) moved it first."""
    moved = (
        update(TRIGGERS)
        .where(TRIGGERS.c.id == trigger_id, TRIGGERS.c.next_fire_at == was)
        .values(next_fire_at=to)
        .returning(TRIGGERS.c.id)
    )
    return (await session.execute(moved)).first() is not None
