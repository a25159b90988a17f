"""Queries that join tasks to the runs executing them (lane `task:<id>`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import RUN_SETTLED, RunStatus, TaskStatus
from app.core.vocabulary import Complexity
from app.runs.models import AGENTS, Run
from app.runs.schemas.runs import RunRead
from app.runs.store import runs as run_store
from app.tasks.models.tasks import Task
from app.tasks.schemas.tasks import TaskRead

TASK_LANE_PREFIX = "task:"


def task_lane(task_id: str) -> str:
    return f"{TASK_LANE_PREFIX}{task_id}"


def lane_task(lane: str) -> str | None:
    """The task a lane executes, or None for any other lane."""
    return lane.removeprefix(TASK_LANE_PREFIX) if lane.startswith(TASK_LANE_PREFIX) else None


async def lane_projects(session: AsyncSession, lanes: Iterable[str]) -> dict[str, str]:
    """The project of each task lane's task (empty: none, or not a task's lane)."""
    tasks = {lane: task for lane in lanes if (task := lane_task(lane)) is not None}
    if not tasks:
        return {}
    found = await session.execute(
        select(Task.id, Task.project).where(Task.id.in_(set(tasks.values())))
    )
    projects = {row.id: row.project or "" for row in found}
    return {lane: projects.get(task, "") for lane, task in tasks.items()}


async def lane_project(session: AsyncSession, lane: str) -> str:
    return (await lane_projects(session, [lane])).get(lane, "")


async def lane_complexity(session: AsyncSession, lane: str) -> Complexity | None:
    """The `estimated_complexity` of the task a lane executes (None: not a task's lane, or
    the task is gone)."""
    task_id = lane_task(lane)
    if task_id is None:
        return None
    found = await session.scalar(select(Task.estimated_complexity).where(Task.id == task_id))
    return None if found is None else Complexity(found)


async def task_spending(
    session: AsyncSession, task_id: str, *, other_than: str
) -> tuple[Decimal, Decimal] | None:
    """A task's `budget_limit` and what its runs other than this one cost, or None when it
    has no limit. The other runs are settled (a task's lane runs one at a time), so their
    `usage` is final."""
    row = (
        await session.execute(
            text(
                "SELECT t.budget_limit, COALESCE(("
                " SELECT sum(CAST(r.usage ->> 'cost_usd' AS numeric)) FROM runs AS r"
                " WHERE r.lane = :lane AND r.id <> :run), 0) AS spent"
                " FROM tasks AS t WHERE t.id = :task AND t.budget_limit IS NOT NULL"
            ),
            {"task": task_id, "lane": task_lane(task_id), "run": other_than},
        )
    ).first()
    return None if row is None else (Decimal(str(row.budget_limit)), Decimal(row.spent))


async def resolve_agent(session: AsyncSession, assignee: str) -> str | None:
    """The agent an `assigned_to` names (by id, else by name), or None: a person."""
    row = await session.execute(
        select(AGENTS.c.id)
        .where((AGENTS.c.id == assignee) | (AGENTS.c.name == assignee))
        .order_by((AGENTS.c.id == assignee).desc(), AGENTS.c.id)
        .limit(1)
    )
    return row.scalar_one_or_none()


async def unfinished_dependencies(session: AsyncSession, task: TaskRead) -> int:
    """How many of the task's dependencies are not completed (a missing one counts)."""
    if not task.dependencies:
        return 0
    done = await session.scalar(
        select(text("count(*)"))
        .select_from(Task)
        .where(Task.id.in_(task.dependencies), Task.status == TaskStatus.COMPLETED)
    )
    return len(set(task.dependencies)) - int(done or 0)


@dataclass(frozen=True)
class UpstreamResult:
    """A completed dependency's title and what its newest completed run answered."""

    title: str
    result: str


async def upstream_results(session: AsyncSession, task: TaskRead) -> list[UpstreamResult]:
    """The results of the task's completed dependencies, in the order it lists them (a
    dependency completed by hand, with no completed run, has none)."""
    if not task.dependencies:
        return []
    lanes = {task_lane(d): d for d in task.dependencies}
    rows = await session.execute(
        select(Task.id, Task.title, Run.lane, Run.result)
        .join(Run, Run.lane == func.concat(TASK_LANE_PREFIX, Task.id))
        .where(
            Task.id.in_(task.dependencies),
            Task.status == TaskStatus.COMPLETED,
            Run.lane.in_(lanes),
            Run.status == RunStatus.COMPLETED,
            Run.result.is_not(None),
        )
        .order_by(Run.created_at, Run.id)
    )
    found = {row.id: UpstreamResult(row.title, row.result) for row in rows}  # newest wins
    return [found[d] for d in dict.fromkeys(task.dependencies) if d in found]


async def dependents(session: AsyncSession, task_id: str) -> list[TaskRead]:
    """Assigned tasks that list `task_id` among their dependencies."""
    rows = await session.scalars(
        select(Task)
        .where(
            Task.status == TaskStatus.ASSIGNED,
            Task.dependencies.op("@>")(text("CAST(:dep AS jsonb)")),
        )
        .params(dep=json.dumps([task_id]))
        .order_by(Task.id)
    )
    return [TaskRead.model_validate(r) for r in rows]


async def tasks_in(
    session: AsyncSession, statuses: Sequence[TaskStatus], *, limit: int
) -> list[TaskRead]:
    rows = await session.scalars(
        select(Task).where(Task.status.in_(statuses)).order_by(Task.id).limit(limit)
    )
    return [TaskRead.model_validate(r) for r in rows]


async def lane_runs(session: AsyncSession, task_id: str) -> list[RunRead]:
    """The task's runs (its first, its retries, its rework), oldest first."""
    runs = await run_store.list_runs(
        session, start=None, limit=1_000, filters={"lane": task_lane(task_id)}
    )
    return sorted(runs, key=lambda run: (run.created_at, run.id))


async def latest_run(session: AsyncSession, task_id: str) -> RunRead | None:
    runs = await lane_runs(session, task_id)
    return runs[-1] if runs else None


async def unsettled_runs(session: AsyncSession, task_id: str) -> list[RunRead]:
    return [r for r in await lane_runs(session, task_id) if r.status not in RUN_SETTLED]
