"""Task mutations as data, and the pure rules that apply one to a task snapshot.

`apply()` never touches the database: it takes the current snapshot (None when absent) and
returns the change it makes, or raises an AppError. The TaskEngine does the I/O, and for
`AssignTask` checks the agent's capacity in the same transaction before applying it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from app.agents.store.agent_loads import AgentLoad
from app.core.errors import (
    Conflict,
    InvalidTransition,
    NotFound,
    ProblemCode,
    ValidationFailed,
    VersionConflict,
)
from app.core.ids import new_id
from app.core.states import (
    COLUMN_STATUS,
    TASK_HELD,
    TaskStatus,
    allowed_targets,
    check_task_transition,
    is_retry,
    task_path,
)
from app.core.vocabulary import AssignmentStrategy, BoardColumn
from app.tasks.schemas.tasks import TaskCreate, TaskRead
from app.tasks.store.tasks import TransitionRecord


class AgentAtCapacity(Conflict):
    """The agent already holds as many tasks as its `max_concurrent_tasks` allows."""

    code = ProblemCode.AGENT_AT_CAPACITY

    def __init__(self, agent_id: str, limit: int) -> None:
        self.agent_id = agent_id
        self.limit = limit
        super().__init__(f"agent {agent_id!r} already holds {limit} tasks, its most")

    def extensions(self) -> dict[str, Any]:
        return {"agent_id": self.agent_id, "max_concurrent_tasks": self.limit}


class WipLimitReached(Conflict):
    """The column holds as many of the project's tasks as its strict WIP limit allows;
    move one out first, or raise the limit."""

    code = ProblemCode.WIP_LIMIT_REACHED

    def __init__(self, project: str, column: BoardColumn, limit: int, count: int) -> None:
        self.project, self.column, self.limit, self.count = project, column, limit, count
        super().__init__(
            f"column {column.value!r} of project {project!r} holds {count} tasks, "
            f"its WIP limit is {limit}"
        )

    def extensions(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "column": self.column.value,
            "wip_limit": self.limit,
            "count": self.count,
        }


@dataclass(frozen=True)
class Change:
    """What one mutation did: the snapshots around it, its audit row and its event type.
    `extra`: more fields for its event; `writes_row` False: an event about the task that
    leaves its row as it is."""

    event_type: str
    before: TaskRead | None
    after: TaskRead | None
    transition: TransitionRecord | None = None
    reason: str | None = None
    extra: Mapping[str, object] = field(default_factory=dict)
    writes_row: bool = True

    @property
    def task(self) -> TaskRead:
        task = self.after or self.before
        assert task is not None
        return task

    @cached_property
    def snapshot(self) -> dict[str, Any]:
        """`task` in its JSON form, computed once for the row, the event and the replay."""
        return self.task.model_dump(mode="json")


def _check_version(task: TaskRead, expected: int | None) -> None:
    if expected is not None and expected != task.version:
        raise VersionConflict(expected=expected, current=task.version)


def _require(task_id: str, current: TaskRead | None) -> TaskRead:
    if current is None:
        raise NotFound("task", task_id)
    return current


def _move(
    task: TaskRead,
    to: TaskStatus,
    *,
    reason: str | None,
    actor: str,
    now: datetime,
    overrides: dict[str, Any],
) -> Change:
    check_task_transition(
        task.status, to, retry_count=task.retry_count, max_retries=task.max_retries
    )
    updates: dict[str, Any] = {**overrides, "status": to, "version": task.version + 1}
    updates["updated_at"] = now
    if is_retry(task.status, to):
        updates["retry_count"] = task.retry_count + 1
    if to is TaskStatus.ASSIGNED and not (overrides.get("assigned_to") or task.assigned_to):
        raise ValidationFailed.field("assigned_to", "a task moving to 'assigned' needs an assignee")
    after = task.model_copy(update=updates)
    record = TransitionRecord(task.id, task.status, to, reason, actor, after.version, now)
    return Change("task.transitioned", task, after, record, reason)


@dataclass(frozen=True)
class CreateTask:
    """`run_id`: the run whose tool call made the create and its `idempotency_key` (the
    key is then kept while that run may run again); None for a client's create."""

    fields: TaskCreate
    actor: str
    idempotency_key: str | None = None
    request_hash: str | None = None
    task_id: str = field(default_factory=lambda: new_id("task"))
    run_id: str | None = None

    def apply(self, current: TaskRead | None, now: datetime) -> Change:
        if current is not None:
            raise Conflict(f"task {self.task_id!r} already exists")
        status = TaskStatus.ASSIGNED if self.fields.assigned_to else TaskStatus.CREATED
        values = {k: v for k, v in self.fields if k != "created_by"}
        task = TaskRead.model_construct(  # the body is already validated
            **values,
            id=self.task_id,
            created_by=self.fields.created_by or self.actor,
            status=status,
            retry_count=0,
            version=1,
            created_at=now,
            updated_at=now,
        )
        record = TransitionRecord(task.id, None, status, "created", self.actor, 1, now)
        return Change("task.created", None, task, record, "created")


@dataclass(frozen=True)
class UpdateTask:
    task_id: str
    changes: dict[str, Any]
    actor: str
    expected_version: int | None = None

    def apply(self, current: TaskRead | None, now: datetime) -> Change:
        task = _require(self.task_id, current)
        _check_version(task, self.expected_version)
        merged = {**task.model_dump(), **self.changes, "version": task.version + 1}
        merged["updated_at"] = now
        return Change("task.updated", task, TaskRead.model_validate(merged))


@dataclass(frozen=True)
class TransitionTask:
    """`enforce_wip` False: the move records what already happened (a run's progress, a
    review's decision), so a strict WIP limit counts it but does not refuse it; past the
    limit it is noted as an advisory limit's would be."""

    task_id: str
    to: TaskStatus
    actor: str
    expected_version: int | None = None
    reason: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    enforce_wip: bool = True

    def apply(self, current: TaskRead | None, now: datetime) -> Change:
        task = _require(self.task_id, current)
        _check_version(task, self.expected_version)
        return _move(
            task, self.to, reason=self.reason, actor=self.actor, now=now, overrides=self.overrides
        )


@dataclass(frozen=True)
class MoveTask:
    """A board move: the task walks the state machine's shortest path to the column's
    status, each step audited, as one change of the batch (all of it or none). Refused
    (`invalid_transition`, naming what the task may do now) when there is no path, or when
    it goes through `assigned` and nobody is named (the task's assignee, or
    `assigned_to`)."""

    task_id: str
    column: BoardColumn
    actor: str
    expected_version: int | None = None
    reason: str | None = None
    assigned_to: str | None = None

    def steps(self, current: TaskRead | None, now: datetime) -> list[Change]:
        task = _require(self.task_id, current)
        _check_version(task, self.expected_version)
        target = COLUMN_STATUS[self.column]
        path = task_path(task.status, target)
        if not path:
            allowed = allowed_targets(
                task.status, retry_count=task.retry_count, max_retries=task.max_retries
            )
            why = " (it is in that column)" if path == () else " (no way there on the board)"
            raise InvalidTransition(task.status, target, allowed, why)
        if TaskStatus.ASSIGNED in path and not (self.assigned_to or task.assigned_to):
            allowed = allowed_targets(
                task.status, retry_count=task.retry_count, max_retries=task.max_retries
            )
            why = " (it needs an assignee on the way: give assigned_to)"
            raise InvalidTransition(task.status, target, allowed, why)
        changes: list[Change] = []
        overrides = {"assigned_to": self.assigned_to} if self.assigned_to else {}
        reason = self.reason or f"moved to {self.column.value}"
        for step in path:
            changes.append(
                _move(task, step, reason=reason, actor=self.actor, now=now, overrides=overrides)
            )
            task = changes[-1].task
        return changes


@dataclass(frozen=True)
class CancelTask:
    task_id: str
    actor: str
    expected_version: int | None = None
    reason: str | None = None

    def apply(self, current: TaskRead | None, now: datetime) -> Change:
        task = _require(self.task_id, current)
        _check_version(task, self.expected_version)
        reason = self.reason or "cancelled"
        return _move(
            task, TaskStatus.CANCELLED, reason=reason, actor=self.actor, now=now, overrides={}
        )


@dataclass(frozen=True)
class DeleteTask:
    task_id: str
    actor: str
    expected_version: int | None = None

    def apply(self, current: TaskRead | None, now: datetime) -> Change:
        task = _require(self.task_id, current)
        _check_version(task, self.expected_version)
        return Change("task.deleted", task, None)


@dataclass(frozen=True)
class AssignTask:
    """Routing's assignment: a `created` task goes to `agent_id` (and `delegation` is added
    to its chain). The TaskEngine refuses it with `agent_at_capacity` when the agent
    already holds its `max_concurrent_tasks`, counted under a lock of the agent's row in
    the transaction that writes the assignment."""

    task_id: str
    agent_id: str
    strategy: AssignmentStrategy
    actor: str
    reason: str
    delegation: tuple[str, ...] = ()

    def check_room(self, load: AgentLoad | None, working: Mapping[str, TaskRead | None]) -> None:
        """Refuse the assignment unless the agent holds fewer tasks than it may: those
        counted in the database outside the batch, plus the batch's own as they stand."""
        if load is None:
            raise NotFound("agent", self.agent_id)
        names = (load.agent_id, load.name)
        in_batch = sum(
            1
            for task in working.values()
            if task is not None and task.status in TASK_HELD and task.assigned_to in names
        )
        if load.held + in_batch >= load.max_concurrent_tasks:
            raise AgentAtCapacity(self.agent_id, load.max_concurrent_tasks)

    def apply(self, current: TaskRead | None, now: datetime) -> Change:
        task = _require(self.task_id, current)
        if task.status is not TaskStatus.CREATED:
            allowed = allowed_targets(
                task.status, retry_count=task.retry_count, max_retries=task.max_retries
            )
            raise InvalidTransition(
                task.status, TaskStatus.ASSIGNED, allowed, " (only a created task is routed)"
            )
        overrides: dict[str, Any] = {"assigned_to": self.agent_id}
        if self.delegation:
            overrides["delegation_chain"] = [*task.delegation_chain, *self.delegation]
        change = _move(
            task,
            TaskStatus.ASSIGNED,
            reason=self.reason,
            actor=self.actor,
            now=now,
            overrides=overrides,
        )
        return Change(
            change.event_type,
            change.before,
            change.after,
            change.transition,
            change.reason,
            extra={"strategy": self.strategy.value},
        )


@dataclass(frozen=True)
class NoteUnroutable:
    """A routing attempt found no agent: the task stays as it is, and its stream says why
    (`task.routing_failed`)."""

    task_id: str
    strategy: AssignmentStrategy
    actor: str
    reason: str

    def apply(self, current: TaskRead | None, now: datetime) -> Change:
        task = _require(self.task_id, current)
        return Change(
            "task.routing_failed",
            task,
            task,
            reason=self.reason,
            extra={"strategy": self.strategy.value, "actor": self.actor},
            writes_row=False,
        )


TaskMutation = (
    CreateTask
    | UpdateTask
    | TransitionTask
    | MoveTask
    | CancelTask
    | DeleteTask
    | AssignTask
    | NoteUnroutable
)


def wip_exceeded(after: TaskRead, column: BoardColumn, limit: int, count: int) -> Change:
    """A move past an advisory WIP limit: accepted, and the tasks stream says so."""
    return Change(
        "task.wip_limit_exceeded",
        after,
        after,
        extra={"column": column.value, "wip_limit": limit, "count": count},
        writes_row=False,
    )
