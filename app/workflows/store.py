"""Workflow definitions, executions and the tasks executions made."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.requirements import ready_nodes
from app.core.states import ExecutionStatus, NodeStatus
from app.tasks.models.tasks import TASKS
from app.tasks.schemas.tasks import TaskRead
from app.workflows.models import (
    WORKFLOW_EXECUTION_TASKS,
    WORKFLOW_EXECUTIONS,
    WORKFLOWS,
    Workflow,
    WorkflowExecution,
    WorkflowExecutionTask,
)
from app.workflows.schemas.workflows import ExecutionProgress, ExecutionRead, WorkflowRead

# -- definitions ---------------------------------------------------------------------------


async def insert_workflow(session: AsyncSession, values: dict[str, Any]) -> WorkflowRead:
    row = (await session.execute(insert(WORKFLOWS).values(**values).returning(*WORKFLOWS.c))).one()
    return WorkflowRead.model_validate(row._mapping)


async def get_workflow(session: AsyncSession, workflow_id: str) -> WorkflowRead | None:
    row = await session.get(Workflow, workflow_id)
    return WorkflowRead.model_validate(row) if row else None


async def list_workflows(
    session: AsyncSession, *, after_id: str | None, limit: int, newest_first: bool = False
) -> list[WorkflowRead]:
    """In creation order (ids sort by it), or newest first; from just past `after_id` in
    that order."""
    key = Workflow.id
    stmt = select(Workflow).order_by(key.desc() if newest_first else key).limit(limit)
    if after_id is not None:
        stmt = stmt.where(key < after_id if newest_first else key > after_id)
    return [WorkflowRead.model_validate(r) for r in await session.scalars(stmt)]


async def update_workflow(
    session: AsyncSession, workflow_id: str, *, read_version: int, values: dict[str, Any]
) -> WorkflowRead | None:
    """Compare-and-set on `version`; None when the row is gone or was changed."""
    row = (
        await session.execute(
            update(WORKFLOWS)
            .where(WORKFLOWS.c.id == workflow_id, WORKFLOWS.c.version == read_version)
            .values(**values, version=read_version + 1, updated_at=func.now())
            .returning(*WORKFLOWS.c)
        )
    ).first()
    return WorkflowRead.model_validate(row._mapping) if row else None


async def delete_workflow(session: AsyncSession, workflow_id: str, *, read_version: int) -> bool:
    deleted = await session.execute(
        delete(WORKFLOWS)
        .where(WORKFLOWS.c.id == workflow_id, WORKFLOWS.c.version == read_version)
        .returning(WORKFLOWS.c.id)
    )
    return deleted.first() is not None


async def has_running_executions(session: AsyncSession, workflow_id: str) -> bool:
    running = select(WorkflowExecution.id).where(
        WorkflowExecution.workflow_id == workflow_id,
        WorkflowExecution.status == ExecutionStatus.RUNNING,
    )
    return bool(await session.scalar(select(running.exists())))


# -- executions ----------------------------------------------------------------------------


def _read(row: WorkflowExecution, node_tasks: dict[str, str]) -> ExecutionRead:
    running = row.status == ExecutionStatus.RUNNING
    ready = ready_nodes(row.node_status, row.waits_for) if running else []
    node_status = {n: NodeStatus(s) for n, s in row.node_status.items()}
    return ExecutionRead(
        id=row.id,
        workflow_id=row.workflow_id,
        workflow_version=row.workflow_version,
        status=ExecutionStatus(row.status),
        context=row.context,
        node_status=node_status,
        node_tasks=node_tasks,
        waits_for=row.waits_for,
        ready_task_ids=[node_tasks[n] for n in ready if n in node_tasks],
        progress=ExecutionProgress.of([node_status[n] for n in row.waits_for if n in node_status]),
        max_parallel_tasks=row.max_parallel_tasks,
        fail_fast=row.fail_fast,
        reason=row.reason,
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
        finished_at=row.finished_at,
    )


async def _node_tasks(
    session: AsyncSession, execution_ids: Sequence[str]
) -> dict[str, dict[str, str]]:
    rows = await session.execute(
        select(WORKFLOW_EXECUTION_TASKS).where(
            WORKFLOW_EXECUTION_TASKS.c.execution_id.in_(execution_ids)
        )
    )
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for row in rows:
        found[row.execution_id][row.node_id] = row.task_id
    return found


async def insert_execution(
    session: AsyncSession, values: dict[str, Any], node_tasks: dict[str, str]
) -> ExecutionRead:
    row = WorkflowExecution(**values)
    session.add(row)
    await session.flush()
    if node_tasks:
        await session.execute(
            insert(WORKFLOW_EXECUTION_TASKS),
            [
                {"task_id": task_id, "execution_id": row.id, "node_id": node_id}
                for node_id, task_id in node_tasks.items()
            ],
        )
    await session.refresh(row)
    return _read(row, dict(node_tasks))


async def get_execution(
    session: AsyncSession, execution_id: str, *, lock: bool = False
) -> ExecutionRead | None:
    """`lock` holds the row until the transaction ends, so that writers take turns."""
    stmt = select(WorkflowExecution).where(WorkflowExecution.id == execution_id)
    if lock:
        stmt = stmt.with_for_update()
    row = await session.scalar(stmt.execution_options(populate_existing=True))
    if row is None:
        return None
    return _read(row, (await _node_tasks(session, [row.id])).get(row.id, {}))


async def list_executions(
    session: AsyncSession,
    workflow_id: str,
    *,
    after_id: str | None,
    limit: int,
    newest_first: bool = False,
) -> list[ExecutionRead]:
    """In creation order, or newest first; from just past `after_id` in that order."""
    key = WorkflowExecution.id
    stmt = (
        select(WorkflowExecution)
        .where(WorkflowExecution.workflow_id == workflow_id)
        .order_by(key.desc() if newest_first else key)
        .limit(limit)
    )
    if after_id is not None:
        stmt = stmt.where(key < after_id if newest_first else key > after_id)
    rows = list(await session.scalars(stmt))
    tasks = await _node_tasks(session, [r.id for r in rows])
    return [_read(r, tasks.get(r.id, {})) for r in rows]


async def update_execution(
    session: AsyncSession, execution_id: str, *, read_version: int, values: dict[str, Any]
) -> bool:
    """Compare-and-set on `version`."""
    written = await session.execute(
        update(WORKFLOW_EXECUTIONS)
        .where(
            WORKFLOW_EXECUTIONS.c.id == execution_id,
            WORKFLOW_EXECUTIONS.c.version == read_version,
        )
        .values(**values, version=read_version + 1, updated_at=func.now())
        .returning(WORKFLOW_EXECUTIONS.c.id)
    )
    return written.first() is not None


async def running_executions_of_tasks(session: AsyncSession, task_ids: Iterable[str]) -> list[str]:
    """The running executions that made any of these tasks."""
    ids = sorted(set(task_ids))
    if not ids:
        return []
    rows = await session.scalars(
        select(WorkflowExecutionTask.execution_id)
        .join(WorkflowExecution, WorkflowExecution.id == WorkflowExecutionTask.execution_id)
        .where(
            WorkflowExecutionTask.task_id.in_(ids),
            WorkflowExecution.status == ExecutionStatus.RUNNING,
        )
        .distinct()
    )
    return sorted(rows)


async def running_execution_ids(session: AsyncSession) -> list[str]:
    rows = await session.scalars(
        select(WorkflowExecution.id).where(WorkflowExecution.status == ExecutionStatus.RUNNING)
    )
    return sorted(rows)


async def tasks_by_id(session: AsyncSession, task_ids: Iterable[str]) -> dict[str, TaskRead]:
    """Current task rows, unlocked: the TaskEngine stays their only writer."""
    ids = sorted(set(task_ids))
    if not ids:
        return {}
    rows = await session.execute(select(TASKS).where(TASKS.c.id.in_(ids)))
    return {row.id: TaskRead.model_validate(row._mapping) for row in rows}


async def workflow_of_task(session: AsyncSession, task_id: str) -> WorkflowRead | None:
    """The definition whose execution made this task (for its review timeout and policy);
    None for a task made outside workflows or whose definition was deleted."""
    row = await session.scalar(
        select(Workflow)
        .join(WorkflowExecution, WorkflowExecution.workflow_id == Workflow.id)
        .join(WorkflowExecutionTask, WorkflowExecutionTask.execution_id == WorkflowExecution.id)
        .where(WorkflowExecutionTask.task_id == task_id)
    )
    return WorkflowRead.model_validate(row) if row else None
