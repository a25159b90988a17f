"""Workflow definitions and their executions."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    Table,
    Text,
    false,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.core.states import ExecutionStatus
from app.core.vocabulary import ReviewTimeoutPolicy, WorkflowKind
from app.db.base import Base
from app.db.columns import now_column, one_of


class Workflow(Base):
    """A workflow definition: a graph of nodes and edges, kept as JSONB."""

    __tablename__ = "workflows"
    __table_args__ = (
        one_of("review_timeout_policy", ReviewTimeoutPolicy),
        one_of("kind", WorkflowKind),
        CheckConstraint("review_timeout_s > 0", name="review_timeout_s"),
        CheckConstraint("max_parallel_tasks >= 1", name="max_parallel_tasks"),
        CheckConstraint("version >= 1", name="version"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text)
    nodes: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    edges: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    review_timeout_s: Mapped[int] = mapped_column(Integer)
    review_timeout_policy: Mapped[str] = mapped_column(Text)
    max_parallel_tasks: Mapped[int | None] = mapped_column(Integer)  # None: no limit
    fail_fast: Mapped[bool] = mapped_column(Boolean, server_default=false())
    kind: Mapped[str] = mapped_column(Text, server_default=WorkflowKind.SEQUENTIAL.value)
    # Board and sprint defaults (WIP limits, sprint length, ...), as a template rendered
    # them; None: the definition sets none.
    board: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    project: Mapped[str | None] = mapped_column(Text)  # activation's default project
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = now_column()
    updated_at: Mapped[datetime] = now_column()


class WorkflowExecution(Base):
    """One activation of a definition: per-node status and what each task node waits on.
    `workflow_id` is a plain reference: an execution's history outlives its definition."""

    __tablename__ = "workflow_executions"
    __table_args__ = (
        one_of("status", ExecutionStatus),
        CheckConstraint("max_parallel_tasks >= 1", name="max_parallel_tasks"),
        CheckConstraint("version >= 1", name="version"),
        Index(None, "workflow_id", "id"),
        Index(None, "status"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    workflow_id: Mapped[str] = mapped_column(Text)
    workflow_version: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(Text)
    context: Mapped[dict[str, Any]] = mapped_column(JSONB)
    node_status: Mapped[dict[str, str]] = mapped_column(JSONB)
    waits_for: Mapped[dict[str, Any]] = mapped_column(JSONB)
    reason: Mapped[str | None] = mapped_column(Text)
    # Copied from the definition at activation (or the activation's override).
    max_parallel_tasks: Mapped[int | None] = mapped_column(Integer)
    fail_fast: Mapped[bool] = mapped_column(Boolean, server_default=false())
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = now_column()
    updated_at: Mapped[datetime] = now_column()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class WorkflowExecutionTask(Base):
    """The task made for a task node; keyed by task so that a task change finds its
    execution with one index lookup."""

    __tablename__ = "workflow_execution_tasks"
    __table_args__ = (Index(None, "execution_id"),)

    task_id: Mapped[str] = mapped_column(Text, primary_key=True)
    execution_id: Mapped[str] = mapped_column(Text, ForeignKey("workflow_executions.id"))
    node_id: Mapped[str] = mapped_column(Text)


WORKFLOWS = cast(Table, Workflow.__table__)
WORKFLOW_EXECUTIONS = cast(Table, WorkflowExecution.__table__)
WORKFLOW_EXECUTION_TASKS = cast(Table, WorkflowExecutionTask.__table__)
