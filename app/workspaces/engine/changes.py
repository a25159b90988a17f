"""Every change of a worktree row, with its events on the worktrees stream in the same
transaction: made, committed (a new diff), moved (its status), its directory removed."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.streams import WORKTREES_STREAM
from app.events import store as event_store
from app.workspaces import store
from app.workspaces.schemas import WorktreeEventType, WorktreeRead


async def insert(
    session: AsyncSession, values: dict[str, Any], now: datetime
) -> WorktreeRead | None:
    """None when the task has a worktree already."""
    made = await store.insert_worktree(session, values)
    if made is not None:
        await _append(session, [_event(WorktreeEventType.CREATED, made)], now)
    return made


async def update(
    session: AsyncSession, now: datetime, worktree: WorktreeRead, **values: Any
) -> WorktreeRead | None:
    """Compare-and-set on the version read; None when another writer came first."""
    written = await store.update_worktree(session, worktree, **values)
    if written is None:
        return None
    found = []
    if written.head_sha != worktree.head_sha or written.diff != worktree.diff:
        found.append(_event(WorktreeEventType.COMMITTED, written))
    if written.status is not worktree.status:
        found.append(
            _event(
                WorktreeEventType.TRANSITIONED,
                written,
                **{"from": worktree.status.value, "to": written.status.value},
            )
        )
    if written.removed and not worktree.removed:
        found.append(_event(WorktreeEventType.REMOVED, written))
    await _append(session, found, now)
    return written


def _event(kind: WorktreeEventType, worktree: WorktreeRead, **extra: Any) -> event_store.NewEvent:
    return event_store.NewEvent(kind.value, {"worktree": worktree.model_dump(mode="json"), **extra})


async def _append(session: AsyncSession, events: list[event_store.NewEvent], now: datetime) -> None:
    await event_store.append_events(session, WORKTREES_STREAM, events, now)
