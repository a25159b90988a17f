"""Task mutations as data, and the pure rules that apply one to a task snapshot.

`apply()` never touches the database: it takes the current snapshot (None when absent) and
returns the change it makes, or raises an AppError. The TaskEngine does the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from app.core.errors import Conflict, NotFound, ValidationFailed, VersionConflict
from app.core.ids import new_id
from app.core.states import TaskStatus, check_task_transition, is_retry
from app.schemas.tasks import TaskCreate, TaskRead
from app.store.tasks import TransitionRecord


@dataclass(frozen=True)
class Change:
    """What one mutation did: the snapshots around it, its audit row and its event type."""

    event_type: str
    before: TaskRead | None
    after: TaskRead | None
    transition: TransitionRecord | None = None
    reason: str | None = None

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
    task_id: str
    to: TaskStatus
    actor: str
    expected_version: int | None = None
    reason: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    def apply(self, current: TaskRead | None, now: datetime) -> Change:
        task = _require(self.task_id, current)
        _check_version(task, self.expected_version)
        return _move(
            task, self.to, reason=self.reason, actor=self.actor, now=now, overrides=self.overrides
        )


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


TaskMutation = CreateTask | UpdateTask | TransitionTask | CancelTask | DeleteTask
