"""Task rows and the audit trail on real Postgres: reads, keyset listing, compare-and-set
writes on `version`, the CHECK constraints, and the translation of driver errors."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import AppError, Conflict, Unavailable
from app.core.states import TaskStatus
from app.db.connection import make_engine
from app.db.errors import StaleWrite, translate
from app.tasks.models.tasks import Task
from app.tasks.schemas.tasks import TaskRead
from app.tasks.store import tasks
from app.tasks.store.tasks import TransitionRecord
from tests.support.task_rows import T0, new_task, rows

S = TaskStatus


def bump(task: TaskRead, **fields: Any) -> TaskRead:
    """The next version of a snapshot, as the engine would write it."""
    return task.model_copy(update={**fields, "version": task.version + 1})


async def test_inserted_task_reads_back_field_for_field(session: AsyncSession, token: str) -> None:
    task = new_task(
        f"task_{token}",
        project="p",
        assigned_to="ana",
        status=S.ASSIGNED,
        reviewers=["bo"],
        artifacts_expected=[{"type": "code", "path": "src/"}],
        deadline=T0 + timedelta(days=3),
        budget_limit=2.5,
    )
    await tasks.insert_tasks(session, rows(task))

    assert await tasks.get_task(session, task.id) == task


async def test_get_unknown_task_is_none(session: AsyncSession, token: str) -> None:
    assert await tasks.get_task(session, f"task_{token}_missing") is None


@pytest.fixture
async def listed(session: AsyncSession, token: str) -> list[TaskRead]:
    """Five tasks of one project, inserted out of id order."""
    made = [
        new_task(f"task_{token}_3", project=token, status=S.ASSIGNED, assigned_to="ana"),
        new_task(f"task_{token}_1", project=token, priority="high"),
        new_task(f"task_{token}_5", project=token, status=S.ASSIGNED, assigned_to="bo"),
        new_task(f"task_{token}_2", project=token, status=S.FAILED, assigned_to="ana"),
        new_task(f"task_{token}_4", project=token, priority="high", assigned_to="ana"),
    ]
    await tasks.insert_tasks(session, rows(*made))
    return sorted(made, key=lambda t: t.id)


async def ids(session: AsyncSession, filters: dict[str, str], **kwargs: Any) -> list[str]:
    rows = await tasks.list_tasks(
        session, after_id=kwargs.get("after_id"), limit=kwargs.get("limit", 100), filters=filters
    )
    return [row.id for row in rows]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, [1, 2, 3, 4, 5]),
        ({"status": "assigned"}, [3, 5]),
        ({"assigned_to": "ana"}, [2, 3, 4]),
        ({"priority": "high"}, [1, 4]),
        ({"status": "assigned", "assigned_to": "ana"}, [3]),
        ({"status": "completed"}, []),
    ],
)
async def test_list_filters_match_on_every_given_column(
    session: AsyncSession,
    token: str,
    listed: list[TaskRead],
    filters: dict[str, str],
    expected: list[int],
) -> None:
    found = await ids(session, {"project": token, **filters})
    assert found == [f"task_{token}_{n}" for n in expected]


async def test_list_by_project_excludes_other_projects(
    session: AsyncSession, token: str, listed: list[TaskRead]
) -> None:
    await tasks.insert_tasks(session, rows(new_task(f"task_{token}_0", project=f"{token}-other")))

    assert await ids(session, {"project": token}) == [t.id for t in listed]
    assert await ids(session, {"project": f"{token}-other"}) == [f"task_{token}_0"]


async def test_keyset_pages_walk_every_task_once_in_id_order(
    session: AsyncSession, token: str, listed: list[TaskRead]
) -> None:
    pages: list[list[str]] = []
    after: str | None = None
    while page := await ids(session, {"project": token}, after_id=after, limit=2):
        pages.append(page)
        after = page[-1]

    assert pages == [
        [f"task_{token}_1", f"task_{token}_2"],
        [f"task_{token}_3", f"task_{token}_4"],
        [f"task_{token}_5"],
    ]
    rows = await tasks.list_tasks(
        session, after_id=f"task_{token}_3", limit=10, filters={"project": token}
    )
    assert rows == listed[3:]


async def test_lock_tasks_returns_the_current_rows_of_known_ids(
    session: AsyncSession, token: str
) -> None:
    a, b = new_task(f"task_{token}_a"), new_task(f"task_{token}_b")
    await tasks.insert_tasks(session, rows(a, b))
    a2 = bump(a, title="renamed")
    await tasks.update_tasks(session, [(rows(a2)[0], 1)])

    locked = await tasks.lock_tasks(session, [b.id, a.id, f"task_{token}_missing", a.id])

    assert locked == {a.id: a2, b.id: b}
    assert await tasks.lock_tasks(session, []) == {}


async def test_update_writes_each_row_still_at_the_version_read(
    session: AsyncSession, token: str
) -> None:
    a, b = new_task(f"task_{token}_a"), new_task(f"task_{token}_b", version=4)
    await tasks.insert_tasks(session, rows(a, b))
    a2, b2 = bump(a, status=S.ASSIGNED, assigned_to="ana"), bump(b, title="renamed")

    await tasks.update_tasks(session, [(rows(a2)[0], 1), (rows(b2)[0], 4)])

    assert await tasks.get_task(session, a.id) == a2
    assert await tasks.get_task(session, b.id) == b2


async def test_a_stale_update_is_refused_and_leaves_the_row_alone(
    session: AsyncSession, token: str
) -> None:
    a = new_task(f"task_{token}_a")
    await tasks.insert_tasks(session, rows(a))
    a2 = bump(a, title="first writer")
    await tasks.update_tasks(session, [(rows(a2)[0], 1)])

    with pytest.raises(StaleWrite) as stale:  # a second writer that also read version 1
        await tasks.update_tasks(session, [(rows(bump(a, title="late writer"))[0], 1)])

    assert await tasks.get_task(session, a.id) == a2
    assert (translate(stale.value).status_code, translate(stale.value).code) == (409, "conflict")


async def test_delete_removes_rows_still_at_the_version_read_and_refuses_stale_ones(
    session: AsyncSession, token: str
) -> None:
    a, b = new_task(f"task_{token}_a"), new_task(f"task_{token}_b", version=3)
    await tasks.insert_tasks(session, rows(a, b))

    await tasks.delete_tasks(session, [(a.id, 1)])
    with pytest.raises(StaleWrite):
        await tasks.delete_tasks(session, [(b.id, 2)])

    assert await tasks.get_task(session, a.id) is None
    assert await tasks.get_task(session, b.id) == b


async def test_transitions_list_per_task_in_insertion_order(
    session: AsyncSession, token: str
) -> None:
    task_id, other = f"task_{token}_a", f"task_{token}_b"

    def record(task: str, before: S | None, after: S, version: int) -> TransitionRecord:
        at = T0 + timedelta(minutes=version)
        return TransitionRecord(task, before, after, f"to {after}", "tester", version, at)

    await tasks.insert_transitions(
        session,
        [
            record(task_id, None, S.CREATED, 1),
            record(other, None, S.ASSIGNED, 1),
            record(task_id, S.CREATED, S.ASSIGNED, 2),
            record(task_id, S.ASSIGNED, S.IN_PROGRESS, 3),
        ],
    )

    trail = await tasks.list_transitions(session, task_id)

    assert [(t.from_status, t.to_status, t.task_version) for t in trail] == [
        (None, S.CREATED, 1),
        (S.CREATED, S.ASSIGNED, 2),
        (S.ASSIGNED, S.IN_PROGRESS, 3),
    ]
    assert trail[0].reason == "to created"
    assert trail[0].actor == "tester"
    assert trail[2].at == T0 + timedelta(minutes=3)
    assert [t.task_id for t in await tasks.list_transitions(session, other)] == [other]


@pytest.mark.parametrize(
    ("column", "value", "constraint"),
    [
        ("status", "done", "ck_tasks_status"),
        ("priority", "urgent", "ck_tasks_priority"),
        ("version", 0, "ck_tasks_version"),
        ("retry_count", -1, "ck_tasks_retry_count"),
    ],
)
async def test_database_refuses_what_the_code_refuses(
    session: AsyncSession, token: str, column: str, value: object, constraint: str
) -> None:
    row = new_task(f"task_{token}").model_dump(mode="json")
    row |= {"created_at": T0, "updated_at": T0, column: value}

    with pytest.raises(IntegrityError) as caught:
        await session.execute(insert(Task).values(**row))

    error = translate(caught.value)
    assert type(error) is Conflict
    assert (error.status_code, error.code) == (409, "conflict")
    assert constraint in error.detail


async def test_duplicate_id_translates_to_conflict_naming_the_primary_key(
    session: AsyncSession, token: str
) -> None:
    task = new_task(f"task_{token}")
    await tasks.insert_tasks(session, rows(task))

    with pytest.raises(IntegrityError) as caught:
        await tasks.insert_tasks(session, rows(task))

    assert "pk_tasks" in translate(caught.value).detail


async def test_unreachable_database_translates_to_503_unavailable() -> None:
    engine = make_engine("postgresql://postgres@127.0.0.1:1/x")
    try:
        with pytest.raises(Exception) as caught:  # noqa: PT011 - whatever the driver raises
            async with engine.connect():
                pass
    finally:
        await engine.dispose()

    error = translate(caught.value)
    assert type(error) is Unavailable
    assert (error.status_code, error.code) == (503, "unavailable")
    assert error.headers() == {"Retry-After": "5"}


def test_unknown_failures_stay_internal_and_app_errors_pass_through() -> None:
    conflict = Conflict("already there")

    assert translate(conflict) is conflict
    assert type(translate(ValueError("boom"))) is AppError
    assert translate(ValueError("boom")).status_code == 500
