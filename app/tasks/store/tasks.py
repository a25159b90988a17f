"""Task rows and their audit trail."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import TaskStatus
from app.core.vocabulary import Priority
from app.db.errors import StaleWrite
from app.tasks.models.tasks import TASKS, Task, TaskTransition
from app.tasks.schemas.tasks import TaskRead, TransitionRead

TaskRow = Mapping[str, Any]
"""A task in its JSON form, `TaskRead.model_dump(mode="json")`: what the writes take."""

# Writes pass a batch of rows as one JSON array that Postgres turns back into records
# (`jsonb_populate_record`): one parameter and one statement, whatever the batch size.
# Column lists come from the table, so a new column cannot be silently skipped.
_COLUMNS = [c.name for c in TASKS.columns]
_COLUMN_LIST = ", ".join(_COLUMNS)
_ASSIGNMENTS = ", ".join(f"{c} = r.{c}" for c in _COLUMNS if c != "id")

_INSERT = text(
    f"INSERT INTO tasks ({_COLUMN_LIST}) "
    f"SELECT {_COLUMN_LIST} FROM jsonb_populate_recordset(NULL::tasks, CAST(:rows AS jsonb))"
)
# Compare-and-set: a row is written only where it still has the version it was read at.
_UPDATE = text(
    f"UPDATE tasks AS t SET {_ASSIGNMENTS} "
    "FROM jsonb_array_elements(CAST(:rows AS jsonb)) AS e, "
    "LATERAL jsonb_populate_record(NULL::tasks, e) AS r "
    "WHERE t.id = r.id AND t.version = (e->>'_read_version')::int RETURNING t.id"
)
_DELETE = text(
    "DELETE FROM tasks AS t USING jsonb_to_recordset(CAST(:rows AS jsonb)) "
    "AS r(id text, version int) WHERE t.id = r.id AND t.version = r.version RETURNING t.id"
)
_INSERT_TRANSITIONS = text(
    "INSERT INTO task_transitions (task_id, from_status, to_status, reason, actor, "
    "task_version, at) SELECT task_id, from_status, to_status, reason, actor, task_version, at "
    "FROM jsonb_populate_recordset(NULL::task_transitions, CAST(:rows AS jsonb))"
)


@dataclass(frozen=True)
class TransitionRecord:
    """A row for the audit trail."""

    task_id: str
    from_status: TaskStatus | None
    to_status: TaskStatus
    reason: str | None
    actor: str
    task_version: int
    at: datetime


async def get_task(session: AsyncSession, task_id: str) -> TaskRead | None:
    row = await session.get(Task, task_id)
    return TaskRead.model_validate(row) if row else None


async def get_tasks(session: AsyncSession, task_ids: Sequence[str]) -> list[TaskRead]:
    """The tasks that exist of `task_ids`, in id order."""
    rows = await session.scalars(select(Task).where(Task.id.in_(task_ids)).order_by(Task.id))
    return [TaskRead.model_validate(row) for row in rows]


async def lock_tasks(session: AsyncSession, task_ids: Iterable[str]) -> dict[str, TaskRead]:
    """Current rows, locked until the transaction ends (other writers wait)."""
    ids = sorted(set(task_ids))  # a stable lock order avoids deadlocks between replicas
    if not ids:
        return {}
    rows = await session.execute(
        select(TASKS).where(TASKS.c.id.in_(ids)).order_by(TASKS.c.id).with_for_update()
    )
    return {row.id: TaskRead.model_validate(row._mapping) for row in rows}


async def insert_tasks(session: AsyncSession, rows: Sequence[TaskRow]) -> None:
    if rows:
        await session.execute(_INSERT, {"rows": json.dumps(rows)})


async def update_tasks(session: AsyncSession, changes: Sequence[tuple[TaskRow, int]]) -> None:
    """Write each new row where the stored one still has the version it was read at."""
    if not changes:
        return
    rows = json.dumps([{**row, "_read_version": read} for row, read in changes])
    written = (await session.execute(_UPDATE, {"rows": rows})).all()
    if len(written) != len(changes):
        raise StaleWrite(f"{len(changes) - len(written)} task rows changed under the writer")


async def delete_tasks(session: AsyncSession, deletions: Sequence[tuple[str, int]]) -> None:
    if not deletions:
        return
    rows = json.dumps([{"id": task_id, "version": read} for task_id, read in deletions])
    deleted = (await session.execute(_DELETE, {"rows": rows})).all()
    if len(deleted) != len(deletions):
        raise StaleWrite(f"{len(deletions) - len(deleted)} task rows changed under the writer")


async def insert_transitions(session: AsyncSession, records: Sequence[TransitionRecord]) -> None:
    if records:
        rows = [
            {
                "task_id": r.task_id,
                "from_status": r.from_status,
                "to_status": r.to_status,
                "reason": r.reason,
                "actor": r.actor,
                "task_version": r.task_version,
                "at": r.at.isoformat(),
            }
            for r in records
        ]
        await session.execute(_INSERT_TRANSITIONS, {"rows": json.dumps(rows)})


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


async def newest_tasks(
    session: AsyncSession,
    *,
    status: TaskStatus,
    before_id: str | None,
    limit: int,
    project: str | None = None,
    assignees: Sequence[str] = (),
) -> list[TaskRead]:
    """Tasks of one status, newest first (ids sort by creation), from just before the task
    `before_id`; of `project` when given, and assigned to any of `assignees` when any."""
    stmt = select(Task).where(Task.status == status).order_by(Task.id.desc()).limit(limit)
    if project is not None:
        stmt = stmt.where(Task.project == project)
    if assignees:
        stmt = stmt.where(Task.assigned_to.in_(assignees))
    if before_id is not None:
        stmt = stmt.where(Task.id < before_id)
    return [TaskRead.model_validate(row) for row in await session.scalars(stmt)]


async def projects(session: AsyncSession, *, limit: int) -> list[str]:
    """The projects tasks name, in order: a filter's choices."""
    rows = await session.scalars(
        select(Task.project)
        .where(Task.project.is_not(None))
        .distinct()
        .order_by(Task.project)
        .limit(limit)
    )
    return [str(project) for project in rows]


# Routing order: the most urgent first, then the oldest.
_URGENCY = case(
    {p.value: rank for rank, p in enumerate(Priority)}, value=Task.priority, else_=len(Priority)
)


async def routable_tasks(session: AsyncSession, *, limit: int) -> list[TaskRead]:
    """`created` tasks that carry a routing request, in routing order: priority (critical
    first), then the oldest."""
    rows = await session.scalars(
        select(Task)
        .where(Task.status == TaskStatus.CREATED, Task.routing.is_not(None))
        .order_by(_URGENCY, Task.created_at, Task.id)
        .limit(limit)
    )
    return [TaskRead.model_validate(row) for row in rows]
