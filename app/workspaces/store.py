"""Workspace settings, one row a project, and the worktrees of their tasks."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import TaskStatus
from app.core.vocabulary import MergeOrder, Priority, WorktreeStatus
from app.tasks.models.tasks import TASKS
from app.workspaces.models import WORKSPACES, WORKTREES
from app.workspaces.schemas import WorkspaceRead, WorkspaceSet, WorktreeRead

# A worktree in one of these counts against its workspace's `max_worktrees`.
IN_USE = (
    WorktreeStatus.ACTIVE,
    WorktreeStatus.QUEUED,
    WorktreeStatus.MERGING,
    WorktreeStatus.CONFLICT,
    WorktreeStatus.HELD,
)
_IN_USE = [s.value for s in IN_USE]
# Task priorities, most urgent first (`merge_order: priority`).
_URGENCY = {p.value: rank for rank, p in enumerate(Priority)}

# -- settings --------------------------------------------------------------------------------


def _in_use(project: Any) -> Any:
    return (
        select(func.count())
        .where(WORKTREES.c.project == project, WORKTREES.c.status.in_(_IN_USE))
        .scalar_subquery()
    )


async def get_workspace(session: AsyncSession, project: str) -> WorkspaceRead | None:
    row = (
        await session.execute(
            select(*WORKSPACES.c, _in_use(WORKSPACES.c.project).label("worktrees_in_use")).where(
                WORKSPACES.c.project == project
            )
        )
    ).first()
    return WorkspaceRead.model_validate(row._mapping) if row else None


async def list_workspaces(
    session: AsyncSession, *, after: str | None, limit: int
) -> list[WorkspaceRead]:
    stmt = (
        select(*WORKSPACES.c, _in_use(WORKSPACES.c.project).label("worktrees_in_use"))
        .order_by(WORKSPACES.c.project)
        .limit(limit)
    )
    if after is not None:
        stmt = stmt.where(WORKSPACES.c.project > after)
    return [WorkspaceRead.model_validate(r._mapping) for r in await session.execute(stmt)]


async def put_workspace(
    session: AsyncSession, project: str, body: WorkspaceSet, *, read_version: int | None
) -> bool:
    """Create (`read_version` None) or replace compare-and-set on the version read; False
    when someone else's write came first."""
    values = body.model_dump(mode="json")
    if read_version is None:
        created = await session.execute(
            insert(WORKSPACES)
            .values(project=project, version=1, **values)
            .on_conflict_do_nothing(index_elements=[WORKSPACES.c.project])
            .returning(WORKSPACES.c.project)
        )
        return created.first() is not None
    changed = await session.execute(
        update(WORKSPACES)
        .where(WORKSPACES.c.project == project, WORKSPACES.c.version == read_version)
        .values(**values, version=read_version + 1, updated_at=func.now())
        .returning(WORKSPACES.c.project)
    )
    return changed.first() is not None


async def delete_workspace(session: AsyncSession, project: str) -> bool:
    deleted = await session.execute(
        WORKSPACES.delete().where(WORKSPACES.c.project == project).returning(WORKSPACES.c.project)
    )
    return deleted.first() is not None


async def worktrees_in_use(session: AsyncSession, project: str) -> int:
    return int(await session.scalar(select(_in_use(project))) or 0)


# -- worktrees -------------------------------------------------------------------------------


async def insert_worktree(session: AsyncSession, values: dict[str, Any]) -> WorktreeRead | None:
    """None when the task has one already (its unique index)."""
    row = (
        await session.execute(
            insert(WORKTREES)
            .values(**values, version=1)
            .on_conflict_do_nothing(index_elements=[WORKTREES.c.task_id])
            .returning(*WORKTREES.c)
        )
    ).first()
    return WorktreeRead.model_validate(row._mapping) if row else None


async def get_worktree(
    session: AsyncSession, worktree_id: str, *, lock: bool = False
) -> WorktreeRead | None:
    stmt = select(WORKTREES).where(WORKTREES.c.id == worktree_id)
    row = (await session.execute(stmt.with_for_update() if lock else stmt)).first()
    return WorktreeRead.model_validate(row._mapping) if row else None


async def worktree_of_task(session: AsyncSession, task_id: str) -> WorktreeRead | None:
    row = (await session.execute(select(WORKTREES).where(WORKTREES.c.task_id == task_id))).first()
    return WorktreeRead.model_validate(row._mapping) if row else None


async def worktrees_of_tasks(
    session: AsyncSession, task_ids: Sequence[str]
) -> dict[str, WorktreeRead]:
    """The worktrees of these tasks (those that have one), by task."""
    if not task_ids:
        return {}
    rows = await session.execute(select(WORKTREES).where(WORKTREES.c.task_id.in_(list(task_ids))))
    found = [WorktreeRead.model_validate(r._mapping) for r in rows]
    return {w.task_id: w for w in found}


async def list_worktrees(
    session: AsyncSession,
    *,
    project: str | None = None,
    task_id: str | None = None,
    status: WorktreeStatus | None = None,
    after: str | None = None,
    limit: int = 50,
) -> list[WorktreeRead]:
    """Newest first."""
    stmt = select(WORKTREES).order_by(WORKTREES.c.id.desc()).limit(limit)
    if project is not None:
        stmt = stmt.where(WORKTREES.c.project == project)
    if task_id is not None:
        stmt = stmt.where(WORKTREES.c.task_id == task_id)
    if status is not None:
        stmt = stmt.where(WORKTREES.c.status == status.value)
    if after is not None:
        stmt = stmt.where(WORKTREES.c.id < after)
    return [WorktreeRead.model_validate(r._mapping) for r in await session.execute(stmt)]


async def update_worktree(
    session: AsyncSession, worktree: WorktreeRead, **values: Any
) -> WorktreeRead | None:
    """Compare-and-set on the version read; None when another writer came first."""
    row = (
        await session.execute(
            update(WORKTREES)
            .where(WORKTREES.c.id == worktree.id, WORKTREES.c.version == worktree.version)
            .values(**values, version=worktree.version + 1, updated_at=func.now())
            .returning(*WORKTREES.c)
        )
    ).first()
    return WorktreeRead.model_validate(row._mapping) if row else None


async def next_to_merge(
    session: AsyncSession, project: str, order: MergeOrder
) -> WorktreeRead | None:
    """The queued worktree whose turn it is: the earliest approved, or the most urgent
    task's (then the earliest). None under `manual` order: a person picks."""
    if order is MergeOrder.MANUAL:
        return None
    stmt = (
        select(WORKTREES)
        .join(TASKS, TASKS.c.id == WORKTREES.c.task_id, isouter=True)
        .where(
            WORKTREES.c.project == project,
            WORKTREES.c.status == WorktreeStatus.QUEUED.value,
        )
        .limit(1)
    )
    if order is MergeOrder.PRIORITY:
        rank = case(_URGENCY, value=TASKS.c.priority, else_=len(_URGENCY))
        stmt = stmt.order_by(rank, WORKTREES.c.queued_at, WORKTREES.c.id)
    else:
        stmt = stmt.order_by(WORKTREES.c.queued_at, WORKTREES.c.id)
    row = (await session.execute(stmt)).first()
    return WorktreeRead.model_validate(row._mapping) if row else None


async def settled_unremoved(
    session: AsyncSession, statuses: Sequence[WorktreeStatus], *, before: datetime | None = None
) -> list[WorktreeRead]:
    """Worktrees in these statuses whose directory is still there (the cleanup's work)."""
    stmt = select(WORKTREES).where(
        WORKTREES.c.status.in_([s.value for s in statuses]), WORKTREES.c.removed.is_(False)
    )
    if before is not None:
        stmt = stmt.where(WORKTREES.c.updated_at < before)
    return [WorktreeRead.model_validate(r._mapping) for r in await session.execute(stmt)]


async def lock_workspace(session: AsyncSession, project: str) -> None:
    """Hold the workspace's row until the transaction ends: worktrees made for it are
    counted one writer at a time."""
    await session.execute(
        select(WORKSPACES.c.project).where(WORKSPACES.c.project == project).with_for_update()
    )


async def unsettled(
    session: AsyncSession, project: str
) -> list[tuple[WorktreeRead, TaskStatus | None]]:
    """The project's worktrees the merge queue watches (in use), each with its task's
    status now (None: the task is gone)."""
    rows = await session.execute(
        select(WORKTREES, TASKS.c.status.label("task_status"))
        .join(TASKS, TASKS.c.id == WORKTREES.c.task_id, isouter=True)
        .where(WORKTREES.c.project == project, WORKTREES.c.status.in_(_IN_USE))
        .order_by(WORKTREES.c.id)
    )
    found = []
    for row in rows:
        values = dict(row._mapping)
        status = values.pop("task_status")
        found.append((WorktreeRead.model_validate(values), TaskStatus(status) if status else None))
    return found


async def all_workspaces(session: AsyncSession) -> list[WorkspaceRead]:
    found: list[WorkspaceRead] = []
    while batch := await list_workspaces(
        session, after=found[-1].project if found else None, limit=500
    ):
        found += batch
    return found
