"""Kanban boards: projects' WIP limits, and a board's tasks column by column."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from sqlalchemy import delete, func, select, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import COLUMN_STATUS, STATUS_COLUMN, TaskStatus
from app.core.vocabulary import BoardColumn, WipMode
from app.sprints.schemas.sprints import SprintRead
from app.tasks.models.boards import WIP_LIMITS
from app.tasks.models.tasks import Task
from app.tasks.schemas.boards import COLUMN_SHOWN, BoardColumnRead, BoardRead, WipLimitSet
from app.tasks.schemas.tasks import TaskRead

Cell = tuple[str, BoardColumn]  # a project's column
# The statuses in no column, in the state machine's order: a board shows them apart.
OFF_BOARD = [s for s in TaskStatus if s not in STATUS_COLUMN]


@dataclass(frozen=True)
class Limit:
    limit: int
    mode: WipMode


async def lock_limits(session: AsyncSession, projects: Iterable[str]) -> dict[Cell, Limit]:
    """The WIP limits of these projects, locked until the transaction ends (in key order,
    as every writer takes them): writers in other processes that would count the same
    columns wait for this one's commit."""
    wanted = sorted(set(projects))
    if not wanted:
        return {}
    rows = await session.execute(
        select(WIP_LIMITS)
        .where(WIP_LIMITS.c.project.in_(wanted))
        .order_by(WIP_LIMITS.c.project, WIP_LIMITS.c.column)
        .with_for_update()
    )
    return {
        (row.project, BoardColumn(row.column)): Limit(row.limit, WipMode(row.mode)) for row in rows
    }


async def column_counts(
    session: AsyncSession, cells: Collection[Cell], *, leaving_out: Collection[str]
) -> Counter[Cell]:
    """How many tasks are in each of these columns of a project (those with a limit: an
    unlimited `done` column grows without end, and counting it on every write would cost
    more with each task), but those in `leaving_out` (the batch's own, counted from its
    working copy)."""
    if not cells:
        return Counter()
    wanted = [(project, COLUMN_STATUS[column].value) for project, column in sorted(cells)]
    stmt = select(Task.project, Task.status, func.count()).where(
        tuple_(Task.project, Task.status).in_(wanted)
    )
    if leaving_out:
        stmt = stmt.where(Task.id.not_in(leaving_out))
    rows = await session.execute(stmt.group_by(Task.project, Task.status))
    return Counter(
        {(str(project), STATUS_COLUMN[TaskStatus(status)]): n for project, status, n in rows.all()}
    )


async def limits_of(session: AsyncSession, project: str) -> dict[BoardColumn, Limit]:
    rows = await session.execute(select(WIP_LIMITS).where(WIP_LIMITS.c.project == project))
    return {BoardColumn(row.column): Limit(row.limit, WipMode(row.mode)) for row in rows}


async def set_limit(session: AsyncSession, project: str, column: BoardColumn, limit: Limit) -> None:
    values = {"project": project, "column": column.value, "limit": limit.limit}
    stmt = insert(WIP_LIMITS).values(**values, mode=limit.mode.value)
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=[WIP_LIMITS.c.project, WIP_LIMITS.c.column],
            set_={"limit": limit.limit, "mode": limit.mode.value, "updated_at": func.now()},
        )
    )


async def add_limits(
    session: AsyncSession, project: str, limits: Mapping[BoardColumn, Limit]
) -> list[BoardColumn]:
    """Set these columns' limits where the project has none: a limit set already is kept,
    also one another transaction sets meanwhile (it commits first, then this one keeps
    it). The columns whose limit this set."""
    if not limits:
        return []
    rows = [
        {"project": project, "column": column.value, "limit": limit.limit, "mode": limit.mode.value}
        for column, limit in limits.items()
    ]
    added = await session.scalars(
        insert(WIP_LIMITS)
        .values(rows)
        .on_conflict_do_nothing(index_elements=[WIP_LIMITS.c.project, WIP_LIMITS.c.column])
        .returning(WIP_LIMITS.c.column)
    )
    return sorted((BoardColumn(c) for c in added), key=list(BoardColumn).index)


async def delete_limit(session: AsyncSession, project: str, column: BoardColumn) -> bool:
    result = await session.execute(
        delete(WIP_LIMITS).where(
            WIP_LIMITS.c.project == project, WIP_LIMITS.c.column == column.value
        )
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def tasks_by_status(
    session: AsyncSession,
    project: str,
    statuses: Collection[TaskStatus],
    *,
    limit: int,
    only: Collection[str] | None = None,
) -> tuple[dict[TaskStatus, list[TaskRead]], Counter[TaskStatus]]:
    """The project's tasks in each status (at most `limit` each, oldest first) and
    how many there are in all; `only`: of these tasks (a sprint's)."""
    where = [Task.project == project, Task.status.in_(statuses)]
    if only is not None:
        where.append(Task.id.in_(only))
    counts = await session.execute(
        select(Task.status, func.count()).where(*where).group_by(Task.status)
    )
    total = Counter({TaskStatus(status): n for status, n in counts.all()})
    ranked = (
        select(Task, func.row_number().over(partition_by=Task.status, order_by=Task.id).label("n"))
        .where(*where)
        .subquery()
    )
    rows = await session.execute(select(ranked).where(ranked.c.n <= limit).order_by(ranked.c.id))
    shown: dict[TaskStatus, list[TaskRead]] = {status: [] for status in statuses}
    for row in rows:
        task = TaskRead.model_validate({k: v for k, v in row._mapping.items() if k != "n"})
        shown[task.status].append(task)
    return shown, total


async def board(
    session: AsyncSession,
    project: str,
    statuses: Collection[TaskStatus] = tuple(TaskStatus),
    *,
    sprint: SprintRead | None = None,
) -> BoardRead:
    """The project's board as the API and the dashboard show it: its columns (those whose
    status is in `statuses`) with counts, WIP limits and their oldest `COLUMN_SHOWN`
    tasks, and the tasks in `statuses` that are in no column; with a `sprint`, only its
    tasks (the WIP limits still count the whole project)."""
    limits = await limits_of(session, project)
    only = [t.task_id for t in sprint.tasks] if sprint is not None else None
    shown, counts = await tasks_by_status(
        session, project, list(statuses), limit=COLUMN_SHOWN, only=only
    )
    columns = [
        BoardColumnRead(
            column=column,
            status=status,
            count=counts[status],
            wip_limit=_limit_set(limits.get(column)),
            tasks=shown[status],
        )
        for column, status in COLUMN_STATUS.items()
        if status in statuses
    ]
    off_board = [task for status in OFF_BOARD if status in statuses for task in shown[status]]
    return BoardRead(project=project, sprint=sprint, columns=columns, off_board=off_board)


def _limit_set(limit: Limit | None) -> WipLimitSet | None:
    return None if limit is None else WipLimitSet(limit=limit.limit, mode=limit.mode)
