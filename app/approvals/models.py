"""Approvals: task reviews and gated tool calls."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    CheckConstraint,
    DateTime,
    Index,
    Integer,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.core.states import ApprovalDecision, ApprovalStatus
from app.core.vocabulary import SUMMARY_MAX_CHARS, ApprovalKind, ReviewTimeoutPolicy
from app.db.base import Base
from app.db.columns import now_column, one_of

DECISION_MATCHES_STATUS = (
    "(status IN ('pending', 'cancelled') AND decision IS NULL)"
    " OR (status IN ('approved', 'rejected') AND decision IS NOT DISTINCT FROM status)"
    " OR (status = 'expired' AND decision IS NOT NULL)"
)


class Approval(Base):
    """A question to a person: sign off a task's review, or consent to one tool call.
    Settled once (a person, its expiry, or a withdrawal); `version` orders the people and
    the expiry sweep who answer it."""

    __tablename__ = "approvals"
    __table_args__ = (
        one_of("kind", ApprovalKind),
        one_of("status", ApprovalStatus),
        one_of("decision", ApprovalDecision),
        # A person's answer is its own decision; an expiry records its policy's effect;
        # nothing was decided while pending or when withdrawn.
        CheckConstraint(DECISION_MATCHES_STATUS, name="decision_matches_status"),
        CheckConstraint(f"char_length(summary) <= {SUMMARY_MAX_CHARS}", name="summary_length"),
        one_of("timeout_policy", ReviewTimeoutPolicy),
        CheckConstraint(
            "kind <> 'task_review' OR (task_id IS NOT NULL AND review_round IS NOT NULL)",
            name="review_target",
        ),
        CheckConstraint(
            "kind <> 'tool_call' OR (run_id IS NOT NULL AND tool_call_id IS NOT NULL)",
            name="tool_call_target",
        ),
        CheckConstraint("kind <> 'merge' OR task_id IS NOT NULL", name="merge_target"),
        CheckConstraint("timeout_s > 0", name="timeout_s"),
        CheckConstraint("escalations >= 0", name="escalations"),
        CheckConstraint("version >= 1", name="version"),
        # Asking twice is answered by the first ask: one review per time a task enters
        # review, at most one of them open, and one approval per tool call.
        Index(
            "uq_approvals_review_round",
            "task_id",
            "review_round",
            unique=True,
            postgresql_where=text("kind = 'task_review'"),
        ),
        Index(
            "uq_approvals_pending_review",
            "task_id",
            unique=True,
            postgresql_where=text("kind = 'task_review' AND status = 'pending'"),
        ),
        Index(
            "uq_approvals_tool_call",
            "run_id",
            "tool_call_id",
            unique=True,
            postgresql_where=text("kind = 'tool_call'"),
        ),
        # The expiry sweep reads pending approvals by deadline.
        Index(
            "ix_approvals_pending_expiry", "expires_at", postgresql_where=text("status = 'pending'")
        ),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    kind: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    task_id: Mapped[str | None] = mapped_column(Text)
    # Plain references: an approval's record outlives the task, run or execution it gated.
    run_id: Mapped[str | None] = mapped_column(Text)
    workflow_execution_id: Mapped[str | None] = mapped_column(Text)
    # The how-many-th time the task entered review (task reviews only).
    review_round: Mapped[int | None] = mapped_column(Integer)
    tool_call_id: Mapped[str | None] = mapped_column(Text)
    tool: Mapped[str | None] = mapped_column(Text)
    # For a tool call: exactly the arguments that run once it is approved.
    arguments: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    question: Mapped[str] = mapped_column(Text)
    # What a person decides from: the agent's stated intent and the call's arguments, or
    # the task's title, acceptance criteria and the run's result (approval_summaries.py).
    summary: Mapped[str] = mapped_column(Text)
    # What it decided (ApprovalDecision); for `expired`, the timeout policy's effect.
    decision: Mapped[str | None] = mapped_column(Text)
    comment: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    decided_by: Mapped[str | None] = mapped_column(Text)
    timeout_s: Mapped[int] = mapped_column(Integer)
    timeout_policy: Mapped[str] = mapped_column(Text)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    escalations: Mapped[int] = mapped_column(Integer)
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = now_column()
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


APPROVALS = cast(Table, Approval.__table__)
