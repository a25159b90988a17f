"""Task coordinations: a parent task decomposed into subtasks and dispatched in waves."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import CheckConstraint, ForeignKey, Index, Table, Text, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.core.states import ExecutionStatus, TaskStatus
from app.core.vocabulary import CoordinationPhase, CoordinationTopology
from app.db.base import Base
from app.db.columns import now_column, one_of

# What a roll-up can make of the parent (`roll_up.RollUp.outcome`).
COORDINATION_OUTCOMES = (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)


class Coordination(Base):
    """One coordination of a parent task: the phase it is in (a coordinator that crashed
    resumes there), the request it runs (the decomposition given, if any, and the dispatch
    options) and each phase's result so far. Its status is an execution's: running, then
    completed, failed or cancelled. A parent has at most one running coordination (the
    partial unique index); a settled one stays as history, and the parent may be
    coordinated again. Deleting the parent deletes its coordinations: they describe
    nothing without it."""

    __tablename__ = "coordinations"
    __table_args__ = (
        one_of("status", ExecutionStatus),
        one_of("phase", CoordinationPhase),
        one_of("topology", CoordinationTopology),  # NULL (not yet resolved) passes
        CheckConstraint(  # NULL until the roll-up
            "outcome IN (" + ", ".join(f"'{o.value}'" for o in COORDINATION_OUTCOMES) + ")",
            name="outcome",
        ),
        Index(
            "uq_coordinations_parent_task_id_running",
            "parent_task_id",
            unique=True,
            postgresql_where=text("status = 'running'"),
        ),
        Index(None, "parent_task_id"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    parent_task_id: Mapped[str] = mapped_column(Text, ForeignKey("tasks.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(Text)
    phase: Mapped[str] = mapped_column(Text)
    topology: Mapped[str | None] = mapped_column(Text)
    wave_topologies: Mapped[list[str]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    request: Mapped[dict[str, Any]] = mapped_column(JSONB)
    decomposition: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    subtasks: Mapped[list[dict[str, Any]]] = mapped_column(
        JSONB, server_default=text("'[]'::jsonb")
    )
    orchestrator_agent_id: Mapped[str | None] = mapped_column(Text)
    runs: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    outcome: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    phase_results: Mapped[list[dict[str, Any]]] = mapped_column(
        JSONB, server_default=text("'[]'::jsonb")
    )
    created_at: Mapped[datetime] = now_column()
    updated_at: Mapped[datetime] = now_column()


COORDINATIONS = cast(Table, Coordination.__table__)
