"""Sprint rows, their backlogs (`sprint_tasks`) and the velocity of completed sprints."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from typing import Any

from sqlalchemy import Select, delete, func, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import SprintStatus, TaskStatus
from app.sprints.models import SPRINT_TASKS, SPRINTS, Sprint
from app.sprints.schemas.sprints import SprintRead, SprintTaskRead, VelocityRead, VelocityRecord
from app.tasks.models.tasks import TASKS


async def _backlogs(
    session: AsyncSession, sprint_ids: Sequence[str]
) -> dict[str, list[SprintTaskRead]]:
    """Each sprint's tasks, oldest addition first, with the task's title and status now."""
    if not sprint_ids:
        return {}
    rows = await session.execute(
        select(
            SPRINT_TASKS.c.sprint_id,
            SPRINT_TASKS.c.task_id,
            SPRINT_TASKS.c.story_points,
            TASKS.c.title,
            TASKS.c.status,
        )
        .join(TASKS, TASKS.c.id == SPRINT_TASKS.c.task_id)
        .where(SPRINT_TASKS.c.sprint_id.in_(sprint_ids))
        .order_by(SPRINT_TASKS.c.sprint_id, SPRINT_TASKS.c.added_at, SPRINT_TASKS.c.task_id)
    )
    found: dict[str, list[SprintTaskRead]] = defaultdict(list)
    for row in rows:
        found[row.sprint_id].append(
            SprintTaskRead(
                task_id=row.task_id,
                title=row.title,
                status=TaskStatus(row.status),
                story_points=row.story_points,
            )
        )
    return found


def points(tasks: Iterable[SprintTaskRead]) -> tuple[int, int]:
    """Committed (every task's points) and completed (the `completed` tasks' points)."""
    backlog = list(tasks)
    committed = sum(t.story_points for t in backlog)
    completed = sum(t.story_points for t in backlog if t.status is TaskStatus.COMPLETED)
    return committed, completed


def _read(row: Any, tasks: list[SprintTaskRead]) -> SprintRead:
    committed, completed = points(tasks)
    if row.status == SprintStatus.COMPLETED:  # its velocity record, fixed at completion
        committed, completed = row.committed_points, row.completed_points
    return SprintRead(
        id=row.id,
        project=row.project,
        name=row.name,
        goal=row.goal,
        start_date=row.start_date,
        end_date=row.end_date,
        duration_days=(row.end_date - row.start_date).days + 1,
        status=SprintStatus(row.status),
        auto_transition=row.auto_transition,
        tasks=tasks,
        committed_points=committed,
        completed_points=completed,
        completed_at=row.completed_at,
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


async def insert_sprint(session: AsyncSession, values: dict[str, Any]) -> SprintRead:
    row = (await session.execute(insert(SPRINTS).values(**values).returning(*SPRINTS.c))).one()
    return _read(row, [])


async def get_sprint(
    session: AsyncSession, sprint_id: str, *, lock: bool = False
) -> SprintRead | None:
    """`lock` holds the row until the transaction ends, so that its writers take turns."""
    stmt = select(SPRINTS).where(SPRINTS.c.id == sprint_id)
    if lock:
        stmt = stmt.with_for_update()
    row = (await session.execute(stmt)).first()
    if row is None:
        return None
    return _read(row, (await _backlogs(session, [sprint_id])).get(sprint_id, []))


async def list_sprints(
    session: AsyncSession,
    *,
    project: str | None,
    status: SprintStatus | None,
    after_id: str | None,
    limit: int,
    newest_first: bool = False,
) -> list[SprintRead]:
    """In creation order (ids sort by it), or newest first; from just past `after_id` in
    that order."""
    key = SPRINTS.c.id
    stmt = select(SPRINTS).order_by(key.desc() if newest_first else key).limit(limit)
    if project is not None:
        stmt = stmt.where(SPRINTS.c.project == project)
    if status is not None:
        stmt = stmt.where(SPRINTS.c.status == status)
    if after_id is not None:
        stmt = stmt.where(key < after_id if newest_first else key > after_id)
    rows = (await session.execute(stmt)).all()
    backlogs = await _backlogs(session, [r.id for r in rows])
    return [_read(r, backlogs.get(r.id, [])) for r in rows]


async def update_sprint(
    session: AsyncSession,
    sprint_id: str,
    *,
    read_version: int,
    values: dict[str, Any],
    now: datetime,
) -> bool:
    """Compare-and-set on `version`: False when the row changed or went."""
    written = await session.execute(
        update(SPRINTS)
        .where(SPRINTS.c.id == sprint_id, SPRINTS.c.version == read_version)
        .values(**values, version=read_version + 1, updated_at=now)
        .returning(SPRINTS.c.id)
    )
    return written.first() is not None


async def active_sprint(session: AsyncSession, project: str) -> str | None:
    """The id of the project's active sprint, if it has one."""
    return await session.scalar(
        select(Sprint.id).where(Sprint.project == project, Sprint.status == SprintStatus.ACTIVE)
    )


async def clock_due(session: AsyncSession, today: date, *, limit: int) -> list[tuple[str, int]]:
    """(id, version) of the active sprints the clock moves whose last day is before `today`,
    most overdue first."""
    rows = await session.execute(
        _clocked(SPRINTS.c.id, SPRINTS.c.version)
        .where(SPRINTS.c.end_date < today)
        .order_by(SPRINTS.c.end_date, SPRINTS.c.id)
        .limit(limit)
    )
    return [(row.id, row.version) for row in rows]


async def next_clocked_end(session: AsyncSession, today: date) -> date | None:
    """The earliest last day, `today` or later, of an active sprint the clock moves."""
    earliest: date | None = await session.scalar(
        _clocked(func.min(SPRINTS.c.end_date)).where(SPRINTS.c.end_date >= today)
    )
    return earliest


def _clocked(*columns: Any) -> Select[Any]:
    # Sprints are few (a project makes one every week or few) and at most one of a project
    # is active: read without an index of their own.
    return select(*columns).where(
        SPRINTS.c.status == SprintStatus.ACTIVE, SPRINTS.c.auto_transition
    )


async def lock_project(session: AsyncSession, project: str) -> None:
    """Hold the project's sprint lock until the transaction ends: writers that look for
    the project's open sprint before making one take turns."""
    await session.execute(
        text("SELECT pg_advisory_xact_lock(hashtext('sprints:project'), hashtext(:project))"),
        {"project": project},
    )


async def projects(session: AsyncSession, *, limit: int) -> dict[str, str | None]:
    """The projects that have sprints, by name (at most `limit`), each with its active
    sprint's id (None: none active)."""
    active = func.max(SPRINTS.c.id).filter(SPRINTS.c.status == SprintStatus.ACTIVE)
    rows = await session.execute(
        select(SPRINTS.c.project, active.label("active"))
        .group_by(SPRINTS.c.project)
        .order_by(SPRINTS.c.project)
        .limit(limit)
    )
    return {row.project: row.active for row in rows}


async def task_projects(
    session: AsyncSession, task_ids: Iterable[str]
) -> dict[str, tuple[str | None, TaskStatus]]:
    """Each existing task's project and status (read, not locked: the TaskEngine writes
    tasks)."""
    ids = sorted(set(task_ids))
    rows = await session.execute(
        select(TASKS.c.id, TASKS.c.project, TASKS.c.status).where(TASKS.c.id.in_(ids))
    )
    return {row.id: (row.project, TaskStatus(row.status)) for row in rows}


async def open_sprints_of(session: AsyncSession, task_ids: Iterable[str]) -> dict[str, str]:
    """task id -> the sprint not completed it belongs to, for those in one."""
    ids = sorted(set(task_ids))
    rows = await session.execute(
        select(SPRINT_TASKS.c.task_id, SPRINT_TASKS.c.sprint_id).where(
            SPRINT_TASKS.c.task_id.in_(ids), SPRINT_TASKS.c.open
        )
    )
    return {row.task_id: row.sprint_id for row in rows}


async def put_tasks(
    session: AsyncSession, sprint_id: str, story_points: dict[str, int], now: datetime
) -> None:
    """Add the tasks to the backlog, or set the points of those in it already."""
    stmt = pg_insert(SPRINT_TASKS).values(
        [
            {
                "sprint_id": sprint_id,
                "task_id": task_id,
                "story_points": points,
                "open": True,
                "added_at": now,
            }
            for task_id, points in story_points.items()
        ]
    )
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=[SPRINT_TASKS.c.sprint_id, SPRINT_TASKS.c.task_id],
            set_={"story_points": stmt.excluded.story_points},
        )
    )


async def remove_task(session: AsyncSession, sprint_id: str, task_id: str) -> bool:
    removed = await session.execute(
        delete(SPRINT_TASKS)
        .where(SPRINT_TASKS.c.sprint_id == sprint_id, SPRINT_TASKS.c.task_id == task_id)
        .returning(SPRINT_TASKS.c.task_id)
    )
    return removed.first() is not None


async def close_backlog(session: AsyncSession, sprint_id: str) -> None:
    """The sprint completed: its tasks may join another sprint."""
    await session.execute(
        update(SPRINT_TASKS).where(SPRINT_TASKS.c.sprint_id == sprint_id).values(open=False)
    )


async def newest_in(session: AsyncSession, project: str, status: SprintStatus) -> str | None:
    """The id of the project's newest sprint in `status`."""
    return await session.scalar(
        select(Sprint.id)
        .where(Sprint.project == project, Sprint.status == status)
        .order_by(Sprint.created_at.desc(), Sprint.id.desc())
        .limit(1)
    )


async def velocity_of(
    session: AsyncSession, project: str, *, window: int, limit: int
) -> VelocityRead:
    """The project's completed sprints (newest first, at most `limit`) and the averages of
    their points over the newest `window`."""
    records = await velocity(session, project, limit=max(window, limit))
    averaged = records[:window]
    count = len(averaged)
    return VelocityRead(
        project=project,
        window=window,
        average_completed_points=(
            sum(r.completed_points for r in averaged) / count if count else None
        ),
        average_committed_points=(
            sum(r.committed_points for r in averaged) / count if count else None
        ),
        sprints_averaged=count,
        records=records[:limit],
    )


async def velocity(session: AsyncSession, project: str, *, limit: int) -> list[VelocityRecord]:
    """The project's completed sprints' records, newest completion first."""
    rows = await session.execute(
        select(SPRINTS)
        .where(SPRINTS.c.project == project, SPRINTS.c.status == SprintStatus.COMPLETED)
        .order_by(SPRINTS.c.completed_at.desc(), SPRINTS.c.id.desc())
        .limit(limit)
    )
    return [
        VelocityRecord(
            sprint_id=row.id,
            name=row.name,
            start_date=row.start_date,
            end_date=row.end_date,
            committed_points=row.committed_points,
            completed_points=row.completed_points,
            completed_at=row.completed_at,
        )
        for row in rows
    ]
