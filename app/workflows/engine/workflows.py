"""Workflow commands: definitions (create, update, delete) and executions (activate, cancel).

Activation is eager: every task on the path the runtime context takes is planned at once
from the definition, not node by node as tasks finish. The execution row is committed first
(with the ids its tasks will have, so that the observer can match every task event to it),
then the tasks are created through the TaskEngine in one burst, which its writer commits
as a group.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import (
    AppError,
    Conflict,
    FieldError,
    NotFound,
    ProblemCode,
    ValidationFailed,
    VersionConflict,
)
from app.core.ids import new_id
from app.core.requirements import leaves
from app.core.states import (
    ExecutionStatus,
    NodeStatus,
    TaskStatus,
    allowed_targets,
    check_execution_transition,
)
from app.core.streams import execution_stream
from app.db import idempotency
from app.db.idempotent_create import CreateKey, keyed_create
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.events.engine.published import Written, published
from app.tasks.engine.board_defaults import apply_wip_limits
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_mutations import CreateTask, TransitionTask
from app.tasks.schemas.tasks import TaskCreate, TaskRead
from app.workflows import store
from app.workflows.engine import execution_transitions
from app.workflows.engine.workflow_graph import Graph, structural_issues, validate_workflow
from app.workflows.engine.workflow_plan import PlannedTask, plan_execution
from app.workflows.schemas.workflows import (
    ActivateRequest,
    ExecutionProgress,
    ExecutionRead,
    ValidationIssue,
    WorkflowCreate,
    WorkflowPatch,
    WorkflowRead,
)

log = logging.getLogger(__name__)

ACTIVATE_SCOPE = "workflow-executions.activate"
CREATE_SCOPE = "workflows.create"


class WorkflowInvalid(ValidationFailed):
    """The workflow breaks the rules listed in `errors`."""

    code = ProblemCode.WORKFLOW_INVALID


class WorkflowInUse(Conflict):
    """The workflow has running executions; cancel them or let them finish first."""

    code = ProblemCode.WORKFLOW_IN_USE


def _refuse(issues: Sequence[ValidationIssue], error: type[ValidationFailed]) -> ValidationFailed:
    def where(issue: ValidationIssue) -> str:
        if issue.node_id:
            return f"nodes[{issue.node_id}]"
        return f"edges[{issue.edge_id}]" if issue.edge_id else "body"

    return error([FieldError(where(i), i.message) for i in issues])


def execution_event(
    event_type: str, execution: ExecutionRead, **extra: Any
) -> event_store.NewEvent:
    return event_store.NewEvent(
        event_type, {"execution": execution.model_dump(mode="json"), **extra}
    )


def node_event(
    node_id: str,
    task_id: str | None,
    before: NodeStatus,
    after: NodeStatus,
    progress: ExecutionProgress,
) -> event_store.NewEvent:
    """A node's change; `progress` is the execution's once the whole change is made."""
    return event_store.NewEvent(
        "workflow.node.changed",
        {
            "node_id": node_id,
            "task_id": task_id,
            "from": before.value,
            "to": after.value,
            "progress": progress.model_dump(mode="json"),
        },
    )


@dataclass(frozen=True)
class Activation:
    execution: ExecutionRead
    replayed: bool = False


@dataclass(frozen=True)
class Activated:
    """An execution recorded by `activate_in`, its tasks not made yet (none for a replay)."""

    execution: ExecutionRead
    replayed: bool
    planned: Sequence[PlannedTask] = ()
    node_tasks: dict[str, str] = field(default_factory=dict)
    project: str | None = None  # the tasks' project: the request's, else the definition's


def cancel_route(task: TaskRead) -> list[TaskStatus]:
    """The transitions that cancel a task: directly where the task machine allows it, else
    through `assigned` (blocked, interrupted, failed with a retry left); none for a task
    that is finished, in review, or was never assigned."""
    allowed = allowed_targets(
        task.status, retry_count=task.retry_count, max_retries=task.max_retries
    )
    if TaskStatus.CANCELLED in allowed:
        return [TaskStatus.CANCELLED]
    if TaskStatus.ASSIGNED in allowed and task.assigned_to:
        return [TaskStatus.ASSIGNED, TaskStatus.CANCELLED]
    return []


async def cancel_open_tasks(
    sessionmaker: async_sessionmaker[AsyncSession],
    tasks: TaskEngine,
    execution: ExecutionRead,
    actor: str,
    why: str,
) -> None:
    """Cancel the execution's tasks that are not finished, through the TaskEngine (whoever
    runs them stops). Best effort: a task that moved meanwhile is left as it is."""
    async with sessionmaker() as session:
        rows = await store.tasks_by_id(session, execution.node_tasks.values())
    for task in rows.values():
        version = task.version
        for target in cancel_route(task):
            try:
                moved = await tasks.submit(TransitionTask(task.id, target, actor, version, why))
            except AppError as exc:  # it moved meanwhile; the execution stays finished
                log.warning("could not cancel task %s of %s: %s", task.id, execution.id, exc)
                break
            version = moved.task.version


class WorkflowCommands:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        tasks: TaskEngine,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        idempotency_retention: timedelta = idempotency.DEFAULT_RETENTION,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._bus = bus
        self._tasks = tasks
        self._clock = clock
        self._idempotency_retention = idempotency_retention

    # -- definitions -----------------------------------------------------------------

    async def create(self, body: WorkflowCreate) -> WorkflowRead:
        workflow, _ = await self.create_keyed(body)
        return workflow

    async def create_keyed(
        self,
        body: WorkflowCreate,
        *,
        idempotency_key: str | None = None,
        request_hash: str | None = None,
    ) -> tuple[WorkflowRead, bool]:
        """The definition, and whether it is the first response to this key, replayed (the
        definition as that create returned it)."""
        self._check_structure(body)
        key = CreateKey.of(CREATE_SCOPE, idempotency_key, request_hash)
        async with self._sessionmaker() as session, session.begin():
            create = await keyed_create(
                session, key, now=self._clock(), retention=self._idempotency_retention
            )
            if create.replay is not None:
                return WorkflowRead.model_validate(create.replay.response), True
            workflow = await self.create_in(session, body)
            await create.remember(workflow.id, workflow.model_dump(mode="json"))
        return workflow, False

    async def create_in(self, session: AsyncSession, body: WorkflowCreate) -> WorkflowRead:
        """A definition saved in the caller's transaction (its structure checked first)."""
        self._check_structure(body)
        values = body.model_dump(mode="json") | {"id": new_id("wf"), "version": 1}
        return await store.insert_workflow(session, values)

    @staticmethod
    def _check_structure(body: WorkflowCreate) -> None:
        issues = structural_issues(body.nodes, body.edges)
        if issues:
            raise _refuse(issues, ValidationFailed)

    async def update(
        self, workflow_id: str, body: WorkflowPatch, *, expected_version: int | None
    ) -> WorkflowRead:
        changes = body.model_dump(mode="json", exclude_unset=True, exclude={"version"})
        expected = body.version if expected_version is None else expected_version
        async with self._sessionmaker() as session, session.begin():
            current = await self._current(session, workflow_id, expected)
            merged = WorkflowCreate.model_validate(
                current.model_dump(mode="json", include=set(WorkflowCreate.model_fields)) | changes
            )
            issues = structural_issues(merged.nodes, merged.edges)
            if issues:
                raise _refuse(issues, ValidationFailed)
            updated = await store.update_workflow(
                session,
                workflow_id,
                read_version=current.version,
                values=merged.model_dump(mode="json"),
            )
            if updated is None:  # changed between our read and our write
                latest = await store.get_workflow(session, workflow_id)
                raise VersionConflict(current.version, latest.version if latest else 0)
            return updated

    async def delete(self, workflow_id: str, *, expected_version: int | None) -> None:
        """Executions keep their history; a definition with running ones is kept."""
        async with self._sessionmaker() as session, session.begin():
            current = await self._current(session, workflow_id, expected_version)
            if await store.has_running_executions(session, workflow_id):
                raise WorkflowInUse(f"workflow {workflow_id!r} has running executions")
            if not await store.delete_workflow(session, workflow_id, read_version=current.version):
                raise VersionConflict(current.version, current.version + 1)

    @staticmethod
    async def _current(
        session: AsyncSession, workflow_id: str, expected_version: int | None
    ) -> WorkflowRead:
        current = await store.get_workflow(session, workflow_id)
        if current is None:
            raise NotFound("workflow", workflow_id)
        if expected_version is not None and expected_version != current.version:
            raise VersionConflict(expected_version, current.version)
        return current

    # -- executions ------------------------------------------------------------------

    async def activate(
        self,
        workflow_id: str,
        body: ActivateRequest,
        actor: str,
        *,
        idempotency_key: str | None = None,
        request_hash: str | None = None,
    ) -> Activation:
        """Plan and record an execution, then create its tasks. With a key, a repeat gets
        the execution as it is now."""
        key = CreateKey.of(ACTIVATE_SCOPE, idempotency_key, request_hash)
        async with self._sessionmaker() as session, session.begin():
            started = await self.activate_in(session, workflow_id, body, key=key, now=self._clock())
        return await self.complete(started, actor)

    async def activate_in(
        self,
        session: AsyncSession,
        workflow_id: str,
        body: ActivateRequest,
        *,
        key: CreateKey | None,
        now: datetime,
    ) -> Activated:
        """The first half of `activate`, inside the caller's transaction: plan the execution
        and record it (row, events, key). Once the caller has committed, `complete` creates
        its tasks. An error may leave rows written in the session: run it in a savepoint to
        go on after one.

        With no `project` in the request the definition's is used; a `kanban` or
        `agile_kanban` definition activated into a project sets its default WIP limits on
        the columns that have none (`app/tasks/engine/board_defaults.py`)."""
        workflow = await store.get_workflow(session, workflow_id)
        if workflow is None:
            raise NotFound("workflow", workflow_id)
        create = await keyed_create(session, key, now=now, retention=self._idempotency_retention)
        if create.replay is not None:
            replay = await store.get_execution(session, create.replay.resource_id)
            if replay is not None:
                return Activated(replay, replayed=True)
        issues = validate_workflow(workflow.nodes, workflow.edges)
        if issues:
            raise _refuse(issues, WorkflowInvalid)
        plan = plan_execution(Graph.of(workflow.nodes, workflow.edges), body.context)
        project = body.project or workflow.project
        if project is not None:
            await apply_wip_limits(session, project, workflow, now=now)
        node_tasks = {t.node_id: new_id("task") for t in plan.tasks}
        values = {
            "id": new_id("wfx"),
            "workflow_id": workflow.id,
            "workflow_version": workflow.version,
            # With no task on the path taken there is nothing to wait for.
            "status": ExecutionStatus.RUNNING if plan.tasks else ExecutionStatus.COMPLETED,
            "context": body.context,
            "node_status": {n: s.value for n, s in plan.node_status.items()},
            "waits_for": {t.node_id: t.waits_for for t in plan.tasks},
            "max_parallel_tasks": body.max_parallel_tasks or workflow.max_parallel_tasks,
            "fail_fast": workflow.fail_fast,
            "version": 1,
            "created_at": now,
            "updated_at": now,
            "finished_at": None if plan.tasks else now,
        }
        execution = await store.insert_execution(session, values, node_tasks)
        events = [execution_event("workflow.execution.started", execution)]
        if not plan.tasks:
            events.append(execution_event("workflow.execution.completed", execution))
        await event_store.append_events(session, execution_stream(execution.id), events, now)
        await create.remember(execution.id)
        return Activated(
            execution, replayed=False, planned=plan.tasks, node_tasks=node_tasks, project=project
        )

    async def complete(self, started: Activated, actor: str) -> Activation:
        """After the commit of `activate_in`: wake the execution's readers and create its
        tasks through the TaskEngine (a failure fails the execution, and is raised)."""
        if started.replayed:
            return Activation(started.execution, replayed=True)
        execution = started.execution
        published(self._bus, [Written(execution_stream(execution.id))])
        await self._create_tasks(execution, started, actor)
        async with self._sessionmaker() as session:
            latest = await store.get_execution(session, execution.id)
        if latest is not None and latest.status is ExecutionStatus.CANCELLED:
            # Cancelled while its tasks were being made: those were not there to cancel.
            await self._cancel_tasks(latest, actor)
        return Activation(latest or execution)

    async def _create_tasks(self, execution: ExecutionRead, started: Activated, actor: str) -> None:
        """Submitted together so that the TaskEngine commits them as one group. A failure
        (queue full, shutting down) fails the execution rather than leave it half made."""
        node_tasks = started.node_tasks

        def mutation(step: PlannedTask) -> CreateTask:
            fields = TaskCreate.model_validate(
                step.config.model_dump(exclude={"title", "assigned_to"})
                | {
                    "title": step.config.title,
                    "assigned_to": step.assigned_to,
                    "routing": step.routing,
                    "project": started.project,
                    "dependencies": [node_tasks[n] for n in leaves(step.waits_for)],
                }
            )
            return CreateTask(fields, actor, task_id=node_tasks[step.node_id])

        results = await asyncio.gather(
            *(self._tasks.submit(mutation(step)) for step in started.planned),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            reason = f"could not create its tasks: {errors[0]}"
            await self._finish(execution.id, ExecutionStatus.FAILED, reason)
            raise errors[0] if isinstance(errors[0], AppError) else AppError(reason)

    async def cancel(self, execution_id: str, reason: str | None, actor: str) -> ExecutionRead:
        """The execution and its open nodes become cancelled in one transaction; then its
        open tasks are cancelled through the TaskEngine (whoever runs them stops)."""
        execution = await self._finish(
            execution_id, ExecutionStatus.CANCELLED, reason or f"cancelled by {actor}"
        )
        await self._cancel_tasks(execution, actor)
        return execution

    async def _cancel_tasks(self, execution: ExecutionRead, actor: str) -> None:
        why = f"workflow execution {execution.id} cancelled"
        await cancel_open_tasks(self._sessionmaker, self._tasks, execution, actor, why)

    async def _finish(
        self, execution_id: str, status: ExecutionStatus, reason: str
    ) -> ExecutionRead:
        """Move a running execution to a final status; its open nodes become cancelled."""
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            current = await store.get_execution(session, execution_id, lock=True)
            if current is None:
                raise NotFound("workflow execution", execution_id)
            check_execution_transition(current.status, status)
            open_nodes = {
                n: s
                for n, s in current.node_status.items()
                if s in (NodeStatus.PENDING, NodeStatus.RUNNING)
            }
            node_status = current.node_status | dict.fromkeys(open_nodes, NodeStatus.CANCELLED)
            finished = await execution_transitions.update(
                session,
                current,
                {
                    "status": status,
                    "reason": reason,
                    "node_status": {n: s.value for n, s in node_status.items()},
                    "finished_at": now,
                },
            )
            events = [
                node_event(
                    node_id,
                    current.node_tasks.get(node_id),
                    before,
                    NodeStatus.CANCELLED,
                    finished.progress,
                )
                for node_id, before in open_nodes.items()
            ]
            events.append(execution_event(f"workflow.execution.{status.value}", finished))
            await event_store.append_events(session, execution_stream(execution_id), events, now)
        published(self._bus, [Written(execution_stream(execution_id))])
        return finished
