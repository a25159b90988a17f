"""Queries behind the limits on tasks working at once: a project's strict WIP limit on its
in_progress column, a workflow execution's `max_parallel_tasks`, and exclusive resources
(two tasks naming one key never work at once).

A task *works* from the moment a run is dispatched for it until it leaves `in_progress`:
it is `in_progress`, or it is still `assigned` (or `interrupted`) with an unsettled run on
its lane (dispatched, not yet followed by the bridge). A task whose run is done counts as
settled once it leaves `in_progress` (for review, failed, cancelled).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import RUN_SETTLED, ExecutionStatus, TaskStatus
from app.core.vocabulary import BoardColumn, WipMode
from app.tasks.schemas.tasks import TaskRead

# The advisory locks' key space (`pg_advisory_xact_lock(space, key)`), apart from others'.
LOCK_SPACE = "dispatch-limits"

_WORKING = f"""(
    t.status = '{TaskStatus.IN_PROGRESS.value}'
    OR (t.status IN ('{TaskStatus.ASSIGNED.value}', '{TaskStatus.INTERRUPTED.value}')
        AND EXISTS (
            SELECT 1 FROM runs AS r
            WHERE r.lane = 'task:' || t.id AND r.status <> ALL(CAST(:settled AS text[]))
        ))
)"""
_SETTLED = sorted(s.value for s in RUN_SETTLED)
_RUNNING = ExecutionStatus.RUNNING.value


def execution_lock_key(execution_id: str) -> str:
    return f"execution:{execution_id}"


def resource_lock_key(resource: str) -> str:
    return f"resource:{resource}"


def project_lock_key(project: str) -> str:
    return f"project:{project}"


async def lock(session: AsyncSession, keys: Sequence[str]) -> None:
    """Hold these keys' advisory locks until the transaction ends, taken in one order (by
    hash) so that two dispatches that share several keys cannot deadlock."""
    await session.execute(
        text(
            "SELECT pg_advisory_xact_lock(hashtext(:space), h) FROM ("
            " SELECT DISTINCT hashtext(k) AS h FROM unnest(CAST(:keys AS text[])) AS k"
            " ORDER BY h) AS ordered"
        ),
        {"space": LOCK_SPACE, "keys": list(keys)},
    )


async def execution_limit(session: AsyncSession, task_id: str) -> tuple[str, int] | None:
    """The running execution that made this task and its `max_parallel_tasks`; None when
    the task is no execution's, or its execution has no limit."""
    row = (
        await session.execute(
            text(
                "SELECT e.id, e.max_parallel_tasks FROM workflow_execution_tasks AS et"
                " JOIN workflow_executions AS e ON e.id = et.execution_id"
                " WHERE et.task_id = :task AND e.status = :running"
                " AND e.max_parallel_tasks IS NOT NULL"
            ),
            {"task": task_id, "running": _RUNNING},
        )
    ).first()
    return None if row is None else (row.id, row.max_parallel_tasks)


async def working_in_execution(session: AsyncSession, execution_id: str, *, other_than: str) -> int:
    """How many of the execution's tasks, other than this one, work now."""
    count = await session.scalar(
        text(
            "SELECT count(*) FROM workflow_execution_tasks AS et"
            " JOIN tasks AS t ON t.id = et.task_id"
            f" WHERE et.execution_id = :execution AND t.id <> :task AND {_WORKING}"
        ),
        {"execution": execution_id, "task": other_than, "settled": _SETTLED},
    )
    return int(count or 0)


async def strict_wip_limit(session: AsyncSession, project: str | None) -> int | None:
    """The project's strict WIP limit on its in_progress column; None when it has none."""
    if project is None:
        return None
    found = await session.scalar(
        text(
            'SELECT "limit" FROM wip_limits'
            ' WHERE project = :project AND "column" = :column AND mode = :strict'
        ),
        {
            "project": project,
            "column": BoardColumn.IN_PROGRESS.value,
            "strict": WipMode.STRICT.value,
        },
    )
    return None if found is None else int(found)


async def working_in_project(session: AsyncSession, project: str, *, other_than: str) -> int:
    """How many of the project's tasks, other than this one, work now."""
    count = await session.scalar(
        text(
            "SELECT count(*) FROM tasks AS t"
            f" WHERE t.project = :project AND t.id <> :task AND {_WORKING}"
        ),
        {"project": project, "task": other_than, "settled": _SETTLED},
    )
    return int(count or 0)


async def holders(session: AsyncSession, resources: Sequence[str], *, other_than: str) -> list[str]:
    """The tasks, other than this one, that name one of these resources and work now."""
    if not resources:
        return []
    rows = await session.scalars(
        text(
            "SELECT t.id FROM tasks AS t"
            f" WHERE t.resources ?| CAST(:keys AS text[]) AND t.id <> :task AND {_WORKING}"
            " ORDER BY t.id"
        ),
        {"keys": list(resources), "task": other_than, "settled": _SETTLED},
    )
    return list(rows)


async def waiting_behind(session: AsyncSession, task: TaskRead, *, limit: int) -> list[str]:
    """Assigned tasks that may have waited for the room this task made: the tasks of its
    running execution when that has a limit, and the tasks naming one of its resources;
    oldest first."""
    rows = await session.scalars(
        text(
            "SELECT t.id FROM tasks AS t"
            " WHERE t.status = :assigned AND t.id <> :task AND ("
            "  t.resources ?| CAST(:keys AS text[])"
            "  OR EXISTS ("
            "   SELECT 1 FROM workflow_execution_tasks AS mine"
            "   JOIN workflow_executions AS e ON e.id = mine.execution_id"
            "   JOIN workflow_execution_tasks AS theirs ON theirs.execution_id = e.id"
            "   WHERE mine.task_id = :task AND theirs.task_id = t.id"
            "   AND e.status = :running AND e.max_parallel_tasks IS NOT NULL))"
            " ORDER BY t.id LIMIT :limit"
        ),
        {
            "assigned": TaskStatus.ASSIGNED.value,
            "task": task.id,
            "keys": list(task.resources),
            "running": _RUNNING,
            "limit": limit,
        },
    )
    return list(rows)
