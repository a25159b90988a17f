"""ORM tables. Closed vocabularies are text columns guarded by CHECK constraints built from
the enums, so that the database refuses what the code would refuse."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    Float,
    Index,
    Integer,
    Table,
    Text,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base
from app.states import TaskStatus
from app.vocabulary import Complexity, CoordinationTopology, Priority, TaskStructure, TaskType


def _one_of(column: str, enum: type[StrEnum]) -> CheckConstraint:
    values = ", ".join(f"'{member.value}'" for member in enum)
    return CheckConstraint(f"{column} IN ({values})", name=column)


def _now() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class Task(Base):
    """A unit of work (seed 002 "Task Definition") with a durable version."""

    __tablename__ = "tasks"
    __table_args__ = (
        _one_of("status", TaskStatus),
        _one_of("type", TaskType),
        _one_of("priority", Priority),
        _one_of("estimated_complexity", Complexity),
        _one_of("task_structure", TaskStructure),
        _one_of("coordination_topology", CoordinationTopology),
        CheckConstraint("max_retries >= 0", name="max_retries"),
        CheckConstraint("retry_count >= 0", name="retry_count"),
        CheckConstraint("version >= 1", name="version"),
        Index(None, "status"),
        Index(None, "assigned_to"),
        Index(None, "project"),
        Index(None, "priority"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    title: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text)
    type: Mapped[str] = mapped_column(Text)
    priority: Mapped[str] = mapped_column(Text)
    project: Mapped[str | None] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(Text)
    assigned_to: Mapped[str | None] = mapped_column(Text)
    reviewers: Mapped[list[str]] = mapped_column(JSONB)
    dependencies: Mapped[list[str]] = mapped_column(JSONB)
    artifacts_expected: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    acceptance_criteria: Mapped[list[str]] = mapped_column(JSONB)
    estimated_complexity: Mapped[str] = mapped_column(Text)
    task_structure: Mapped[str] = mapped_column(Text)
    coordination_topology: Mapped[str] = mapped_column(Text)
    budget_limit: Mapped[float | None] = mapped_column(Float)
    deadline: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    max_retries: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(Text)
    parent_task_id: Mapped[str | None] = mapped_column(Text)
    delegation_chain: Mapped[list[str]] = mapped_column(JSONB)
    retry_count: Mapped[int] = mapped_column(Integer)
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class TaskTransition(Base):
    """Append-only audit trail of task status changes. Rows outlive a deleted task."""

    __tablename__ = "task_transitions"
    __table_args__ = (Index(None, "task_id", "id"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(Text)
    from_status: Mapped[str | None] = mapped_column(Text)
    to_status: Mapped[str] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(Text)
    task_version: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime] = _now()


class EventStream(Base):
    """The last sequence number handed out per stream. Its row lock orders writers, so a
    reader never sees sequence n+1 committed before n."""

    __tablename__ = "event_streams"

    stream: Mapped[str] = mapped_column(Text, primary_key=True)
    last_seq: Mapped[int] = mapped_column(BigInteger)


class Event(Base):
    """An event in a stream (the outbox): written in the transaction of the change."""

    __tablename__ = "events"

    stream: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    type: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = _now()


class IdempotencyKey(Base):
    """A client's Idempotency-Key with the request it answered and the response it got."""

    __tablename__ = "idempotency_keys"

    scope: Mapped[str] = mapped_column(Text, primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    request_hash: Mapped[str] = mapped_column(Text)
    resource_id: Mapped[str] = mapped_column(Text)
    response: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = _now()


# Typed handles on the tables, for Core statements (bulk writes, executemany).
TASKS = cast(Table, Task.__table__)
TRANSITIONS = cast(Table, TaskTransition.__table__)
EVENTS = cast(Table, Event.__table__)
IDEMPOTENCY_KEYS = cast(Table, IdempotencyKey.__table__)
