"""Task rows and their audit trail."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import and_, bindparam, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.engine.task_mutations import TransitionRecord
from app.models import TASKS, TRANSITIONS, Task, TaskTransition
from app.schemas import TaskRead, TransitionRead

_WRITABLE = [c.name for c in TASKS.columns if c.name != "id"]


def _row(task: TaskRead) -> dict[str, Any]:
    return task.model_dump(mode="json") | {
        "created_at": task.created_at,
        "updated_at": task.updated_at,
        "deadline": task.deadline,
    }


async def get_task(session: AsyncSession, task_id: str) -> TaskRead | None:
    row = await session.get(Task, task_id)
    return TaskRead.model_validate(row) if row else None


async def lock_tasks(session: AsyncSession, task_ids: Iterable[str]) -> dict[str, TaskRead]:
    """Current rows, locked until the transaction ends (other writers wait)."""
    ids = sorted(set(task_ids))  # a stable lock order avoids deadlocks between replicas
    if not ids:
        return {}
    rows = await session.scalars(
        select(Task).where(Task.id.in_(ids)).order_by(Task.id).with_for_update()
    )
    return {row.id: TaskRead.model_validate(row) for row in rows}


async def insert_tasks(session: AsyncSession, tasks: Sequence[TaskRead]) -> None:
    if tasks:
        await session.execute(insert(TASKS), [_row(t) for t in tasks])


async def update_tasks(session: AsyncSession, changes: Sequence[tuple[TaskRead, int]]) -> None:
    """Write each new snapshot where the row still has the version it was read at."""
    if not changes:
        return
    stmt = (
        update(TASKS)
        .where(and_(TASKS.c.id == bindparam("_id"), TASKS.c.version == bindparam("_read")))
        .values({name: bindparam(name) for name in _WRITABLE})
    )
    params = []
    for task, read_version in changes:
        row = _row(task)
        row["_id"] = row.pop("id")
        row["_read"] = read_version
        params.append(row)
    await session.execute(stmt, params)


async def delete_tasks(session: AsyncSession, deletions: Sequence[tuple[str, int]]) -> None:
    if deletions:
        stmt = delete(TASKS).where(
            and_(TASKS.c.id == bindparam("_id"), TASKS.c.version == bindparam("_read"))
        )
        await session.execute(stmt, [{"_id": i, "_read": v} for i, v in deletions])


async def insert_transitions(session: AsyncSession, records: Sequence[TransitionRecord]) -> None:
    if records:
        await session.execute(
            insert(TRANSITIONS),
            [
                {
                    "task_id": r.task_id,
                    "from_status": r.from_status,
                    "to_status": r.to_status,
                    "reason": r.reason,
                    "actor": r.actor,
                    "task_version": r.task_version,
                    "at": r.at,
                }
                for r in records
            ],
        )


async def list_tasks(
    session: AsyncSession,
    *,
    after_id: str | None,
    limit: int,
    filters: dict[str, str],
) -> list[TaskRead]:
    """Tasks in id (creation) order; `filters` are equality matches on columns."""
    stmt = select(Task).order_by(Task.id).limit(limit)
    for column, value in filters.items():
        stmt = stmt.where(getattr(Task, column) == value)
    if after_id is not None:
        stmt = stmt.where(Task.id > after_id)
    return [TaskRead.model_validate(row) for row in await session.scalars(stmt)]


async def list_transitions(session: AsyncSession, task_id: str) -> list[TransitionRead]:
    rows = await session.scalars(
        select(TaskTransition).where(TaskTransition.task_id == task_id).order_by(TaskTransition.id)
    )
    return [TransitionRead.model_validate(row) for row in rows]
