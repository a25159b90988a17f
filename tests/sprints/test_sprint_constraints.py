"""Sprint rows on real Postgres: the database itself keeps one active sprint a project, a
task in one sprint not completed, dates in order, and a velocity exactly on completed
sprints; a deleted task leaves its sprint's backlog."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest
from sqlalchemy import delete, insert, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import SprintStatus
from app.db.errors import constraint_name
from app.sprints.models import SPRINTS
from app.sprints.store import sprints
from app.tasks.models.tasks import TASKS
from app.tasks.store import tasks
from tests.support.task_rows import new_task, rows

NOW = datetime(2026, 12, 1, tzinfo=UTC)


async def _sprint(session: AsyncSession, sprint_id: str, project: str, **fields: Any) -> str:
    values = {
        "id": sprint_id,
        "project": project,
        "name": sprint_id,
        "goal": "",
        "start_date": date(2026, 12, 1),
        "end_date": date(2026, 12, 14),
        "status": SprintStatus.PLANNING.value,
        "version": 1,
        **fields,
    }
    await session.execute(insert(SPRINTS).values(**values))
    return sprint_id


async def _refused(session: AsyncSession, statement: Any) -> str | None:
    with pytest.raises(IntegrityError) as refused:
        async with session.begin_nested():
            await session.execute(statement)
    return constraint_name(refused.value)


async def test_one_active_sprint_a_project(session: AsyncSession, token: str) -> None:
    project = f"p_{token}"
    await _sprint(session, f"sprint_a{token}", project, status="active")
    second = await _sprint(session, f"sprint_b{token}", project)
    await _sprint(session, f"sprint_c{token}", f"other_{token}", status="active")
    activate = update(SPRINTS).where(SPRINTS.c.id == second).values(status="active")
    assert await _refused(session, activate) == "uq_sprints_project_active"


async def test_a_task_is_in_one_open_sprint(session: AsyncSession, token: str) -> None:
    project = f"p_{token}"
    task_id = f"task_{token}"
    await tasks.insert_tasks(session, rows(new_task(task_id, project=project)))
    first = await _sprint(session, f"sprint_a{token}", project)
    second = await _sprint(session, f"sprint_b{token}", project)
    await sprints.put_tasks(session, first, {task_id: 3}, NOW)
    with pytest.raises(IntegrityError) as refused:
        async with session.begin_nested():
            await sprints.put_tasks(session, second, {task_id: 3}, NOW)
    assert constraint_name(refused.value) == "uq_sprint_tasks_task_id_open"

    await sprints.close_backlog(session, first)  # its sprint completed: carried over
    await sprints.put_tasks(session, second, {task_id: 2}, NOW)
    assert await sprints.open_sprints_of(session, [task_id]) == {task_id: second}

    await session.execute(delete(TASKS).where(TASKS.c.id == task_id))
    read = await sprints.get_sprint(session, second)
    assert read is not None and read.tasks == [] and read.committed_points == 0


async def test_dates_in_order_and_velocity_only_when_completed(
    session: AsyncSession, token: str
) -> None:
    sprint = await _sprint(session, f"sprint_{token}", f"p_{token}")
    backwards = update(SPRINTS).where(SPRINTS.c.id == sprint).values(end_date=date(2026, 11, 1))
    assert await _refused(session, backwards) == "ck_sprints_dates"
    bare = update(SPRINTS).where(SPRINTS.c.id == sprint).values(status="completed")
    assert await _refused(session, bare) == "ck_sprints_velocity"
    early = update(SPRINTS).where(SPRINTS.c.id == sprint).values(committed_points=3)
    assert await _refused(session, early) == "ck_sprints_velocity"
    await session.execute(
        update(SPRINTS)
        .where(SPRINTS.c.id == sprint)
        .values(status="completed", committed_points=5, completed_points=3, completed_at=NOW)
    )
