"""The one writer of a workflow execution's row, status included: a cancel through the API
and the execution observer both write through `update`, which checks a new status against
the execution machine (`check_execution_transition`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import ExecutionStatus, check_execution_transition
from app.workflows import store
from app.workflows.schemas.workflows import ExecutionRead


async def update(
    session: AsyncSession, current: ExecutionRead, values: dict[str, Any]
) -> ExecutionRead:
    """Write `values` to an execution this transaction holds locked, and read it back;
    `invalid_transition` (409) when they carry a status its machine does not allow."""
    status = values.get("status")
    if status is not None and ExecutionStatus(status) is not current.status:
        check_execution_transition(current.status, ExecutionStatus(status))
    await store.update_execution(session, current.id, read_version=current.version, values=values)
    written = await store.get_execution(session, current.id)
    if written is None:  # the caller locked the row: it cannot have gone
        raise RuntimeError(f"execution {current.id} vanished under its lock")
    return written
