"""Coordination rows: create one for a parent task, read it, and record each phase's
result as the coordinator moves on, so that a coordinator that crashed resumes at the
phase it was in."""

from __future__ import annotations

from typing import Any

from sqlalchemy import exists, func, select, type_coerce, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from app.coordination.models import COORDINATIONS, Coordination
from app.coordination.schemas import (
    CoordinationRead,
    CoordinationRequest,
    CoordinationRun,
    PhaseResult,
)
from app.core.states import ExecutionStatus, TaskStatus
from app.core.vocabulary import CoordinationPhase
from app.db.errors import StaleWrite
from app.tasks.models.tasks import Task
from app.tasks.schemas.tasks import TaskRead


async def insert_coordination(
    session: AsyncSession, coordination_id: str, parent_task_id: str, request: CoordinationRequest
) -> CoordinationRead:
    """A running coordination at its first phase. A parent with one running already fails
    on `uq_coordinations_parent_task_id_running` (an IntegrityError, a 409 through
    `translate`); with a savepoint the caller's transaction survives it."""
    row = Coordination(
        id=coordination_id,
        parent_task_id=parent_task_id,
        status=ExecutionStatus.RUNNING,
        phase=CoordinationPhase.DECOMPOSE,
        request=request.model_dump(mode="json"),
        phase_results=[],
    )
    session.add(row)
    await session.flush()
    await session.refresh(row)
    return CoordinationRead.model_validate(row)


async def get_coordination(
    session: AsyncSession, coordination_id: str, *, lock: bool = False
) -> CoordinationRead | None:
    """`lock` holds the row until the transaction ends, so that coordinators take turns."""
    stmt = select(Coordination).where(Coordination.id == coordination_id)
    if lock:
        stmt = stmt.with_for_update()
    row = await session.scalar(stmt.execution_options(populate_existing=True))
    return None if row is None else CoordinationRead.model_validate(row)


async def running_coordination(
    session: AsyncSession, parent_task_id: str
) -> CoordinationRead | None:
    """The parent's running coordination (there is at most one), to resume or refuse."""
    row = await session.scalar(
        select(Coordination).where(
            Coordination.parent_task_id == parent_task_id,
            Coordination.status == ExecutionStatus.RUNNING,
        )
    )
    return None if row is None else CoordinationRead.model_validate(row)


async def running_ids(session: AsyncSession) -> list[str]:
    """Every running coordination, oldest first: what a coordinator resumes at start-up."""
    rows = await session.scalars(
        select(Coordination.id)
        .where(Coordination.status == ExecutionStatus.RUNNING)
        .order_by(Coordination.id)
    )
    return list(rows)


async def awaiting_coordination(session: AsyncSession, *, limit: int) -> list[TaskRead]:
    """`created` tasks that carry a coordination request and were never coordinated,
    oldest first (their dependencies may not be completed yet)."""
    rows = await session.scalars(
        select(Task)
        .where(
            Task.status == TaskStatus.CREATED,
            Task.coordination.is_not(None),
            ~exists().where(Coordination.parent_task_id == Task.id),
        )
        .order_by(Task.created_at, Task.id)
        .limit(limit)
    )
    return [TaskRead.model_validate(row) for row in rows]


async def coordinated(session: AsyncSession, task_id: str) -> bool:
    """True while `task_id` is the parent of a running coordination: the coordination
    drives it, and it gets no run of its own."""
    found = await session.scalar(
        select(Coordination.id).where(
            Coordination.parent_task_id == task_id,
            Coordination.status == ExecutionStatus.RUNNING,
        )
    )
    return found is not None


async def of_task(
    session: AsyncSession, parent_task_id: str, *, limit: int
) -> list[CoordinationRead]:
    """A parent task's coordinations, newest first."""
    rows = await session.scalars(
        select(Coordination)
        .where(Coordination.parent_task_id == parent_task_id)
        .order_by(Coordination.id.desc())
        .limit(limit)
    )
    return [CoordinationRead.model_validate(row) for row in rows]


async def record_phase(
    session: AsyncSession,
    coordination_id: str,
    result: PhaseResult,
    *,
    at: CoordinationPhase,
    next_phase: CoordinationPhase | None = None,
    status: ExecutionStatus | None = None,
    **fields: Any,
) -> CoordinationRead:
    """Append `result` to a running coordination still at phase `at`, and, given, move it
    to `next_phase`, settle it (`status`) and set the other columns named in `fields`
    (JSON columns take their JSON form). A coordination settled or moved on meanwhile (by
    a coordinator in another process) records nothing: `StaleWrite`."""
    changes: dict[str, Any] = {
        "phase_results": COORDINATIONS.c.phase_results.op("||")(
            func.jsonb_build_array(type_coerce(result.model_dump(mode="json"), JSONB))
        ),
        "phase": next_phase,
        "status": status,
        "updated_at": func.now(),
    }
    changes = {k: v for k, v in changes.items() if v is not None} | fields
    return await _update(session, coordination_id, changes, at=at)


async def set_runs(
    session: AsyncSession, coordination_id: str, runs: list[CoordinationRun]
) -> CoordinationRead:
    """Replace the runs the coordination made (peers' rounds, the synthesis) while it
    runs; each run was created under a key of its own, so two coordinators write the same
    list."""
    changes = {"runs": [run.model_dump(mode="json") for run in runs], "updated_at": func.now()}
    return await _update(session, coordination_id, changes, at=None)


async def _update(
    session: AsyncSession,
    coordination_id: str,
    changes: dict[str, Any],
    *,
    at: CoordinationPhase | None,
) -> CoordinationRead:
    where = [
        COORDINATIONS.c.id == coordination_id,
        COORDINATIONS.c.status == ExecutionStatus.RUNNING,
    ]
    if at is not None:
        where.append(COORDINATIONS.c.phase == at)
    row = (
        await session.execute(
            update(COORDINATIONS).where(*where).values(changes).returning(*COORDINATIONS.c)
        )
    ).one_or_none()
    if row is None:
        raise StaleWrite(f"coordination {coordination_id} is not running at {at}")
    return CoordinationRead.model_validate(row._mapping)
