"""Setting and removing a board column's WIP limit, with its `board.wip_limit_changed`
event on the tasks stream (the board's) in the same transaction: an open board, or a
client following the stream, learns of the new limit when it takes effect."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.streams import TASK_STREAM
from app.core.vocabulary import BoardColumn
from app.events import store as events
from app.events.schemas import WipLimitEventType
from app.tasks.store import boards
from app.tasks.store.boards import Limit


async def set_wip_limit(
    session: AsyncSession,
    project: str,
    column: BoardColumn,
    limit: Limit,
    *,
    actor: str,
    now: datetime,
) -> None:
    await boards.set_limit(session, project, column, limit)
    await _record(session, project, column, limit, actor, now)


async def add_default_limits(
    session: AsyncSession,
    project: str,
    limits: Mapping[BoardColumn, Limit],
    *,
    actor: str,
    now: datetime,
) -> list[BoardColumn]:
    """Set these limits on the project's columns that have none (a limit set already is
    kept); the columns set, each with its event."""
    added = await boards.add_limits(session, project, limits)
    for column in added:
        await _record(session, project, column, limits[column], actor, now)
    return added


async def remove_wip_limit(
    session: AsyncSession, project: str, column: BoardColumn, *, actor: str, now: datetime
) -> bool:
    """False when the column had no limit (nothing recorded)."""
    if not await boards.delete_limit(session, project, column):
        return False
    await _record(session, project, column, None, actor, now)
    return True


async def _record(
    session: AsyncSession,
    project: str,
    column: BoardColumn,
    limit: Limit | None,
    actor: str,
    now: datetime,
) -> None:
    data = {
        "project": project,
        "column": column.value,
        "limit": limit.limit if limit else None,
        "mode": limit.mode.value if limit else None,
        "actor": actor,
    }
    changed = events.NewEvent(WipLimitEventType.CHANGED.value, data)
    await events.append_events(session, TASK_STREAM, [changed], now)
