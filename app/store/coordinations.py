"""Coordination rows: create one for a parent task, read it, and record each phase's
result as the coordinator moves on, so that a coordinator that crashed resumes at the
phase it was in."""

from __future__ import annotations

from sqlalchemy import func, select, type_coerce, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import ExecutionStatus
from app.core.vocabulary import CoordinationPhase, CoordinationTopology
from app.models import COORDINATIONS, Coordination
from app.schemas.coordination import CoordinationRead, CoordinationRequest, PhaseResult
from app.store.errors import StaleWrite


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


async def record_phase(
    session: AsyncSession,
    coordination_id: str,
    result: PhaseResult,
    *,
    next_phase: CoordinationPhase | None = None,
    topology: CoordinationTopology | None = None,
    status: ExecutionStatus | None = None,
) -> CoordinationRead:
    """Append `result` to a running coordination's phase results and, given, move it to
    `next_phase`, record its resolved `topology` and settle it (`status`). A settled
    coordination records nothing more: `StaleWrite`."""
    changes = {
        "phase_results": COORDINATIONS.c.phase_results.op("||")(
            func.jsonb_build_array(type_coerce(result.model_dump(mode="json"), JSONB))
        ),
        "phase": next_phase,
        "topology": topology,
        "status": status,
        "updated_at": func.now(),
    }
    row = (
        await session.execute(
            update(COORDINATIONS)
            .where(
                COORDINATIONS.c.id == coordination_id,
                COORDINATIONS.c.status == ExecutionStatus.RUNNING,
            )
            .values({k: v for k, v in changes.items() if v is not None})
            .returning(*COORDINATIONS.c)
        )
    ).one_or_none()
    if row is None:
        raise StaleWrite(f"coordination {coordination_id} is not running")
    return CoordinationRead.model_validate(row._mapping)
