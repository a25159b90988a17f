"""Tasks and their audit trail."""

from __future__ import annotations

from datetime import datetime
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
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.core.states import TaskStatus
from app.core.vocabulary import Complexity, CoordinationTopology, Priority, TaskStructure, TaskType
from app.db.base import Base
from app.db.columns import now_column, one_of


class Task(Base):
    """A unit of work with a durable version."""

    __tablename__ = "tasks"
    __table_args__ = (
        one_of("status", TaskStatus),
        one_of("type", TaskType),
        one_of("priority", Priority),
        one_of("estimated_complexity", Complexity),
        one_of("task_structure", TaskStructure),
        one_of("coordination_topology", CoordinationTopology),
        CheckConstraint("max_retries >= 0", name="max_retries"),
        CheckConstraint("retry_count >= 0", name="retry_count"),
        CheckConstraint("version >= 1", name="version"),
        Index(None, "status"),
        Index(None, "assigned_to"),
        Index(None, "project"),
        Index(None, "priority"),
        Index(None, "resources", postgresql_using="gin"),
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
    # How to route it while it is `created` (a RouteRequest); None: someone assigns it.
    routing: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # A coordination to start once it is ready (a CoordinationRequest); None: none.
    coordination: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # Keys of exclusive resources: no two tasks naming one key have runs working at once.
    resources: Mapped[list[str]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    retry_count: Mapped[int] = mapped_column(Integer)
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = now_column()
    updated_at: Mapped[datetime] = now_column()


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
    at: Mapped[datetime] = now_column()


TASKS = cast(Table, Task.__table__)
TRANSITIONS = cast(Table, TaskTransition.__table__)
