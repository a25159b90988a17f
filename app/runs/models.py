"""Agents, conversations, their runs and the runs' history."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.core.states import RUN_ACTIVE, RunStatus
from app.core.vocabulary import ExecutionLoopKind, StepKind
from app.db.base import Base
from app.db.columns import now_column, one_of


class Agent(Base):
    """Identity and configuration of an agent: prompt, tools, model, limits."""

    __tablename__ = "agents"
    __table_args__ = (one_of("execution_loop", ExecutionLoopKind),)

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(Text)
    skills: Mapped[list[str]] = mapped_column(JSONB)
    system_prompt: Mapped[str] = mapped_column(Text)
    tools: Mapped[list[str]] = mapped_column(JSONB)
    # Side-effecting tools it may run without a person's approval (the default asks).
    auto_approve: Mapped[list[str]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    model: Mapped[dict[str, Any]] = mapped_column(JSONB)
    limits: Mapped[dict[str, Any]] = mapped_column(JSONB)
    max_concurrent_tasks: Mapped[int] = mapped_column(Integer)
    cost_tier: Mapped[str] = mapped_column(Text)
    personality: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The MCP servers whose tools it may call (each a stdio command or an HTTP URL).
    mcp_servers: Mapped[list[dict[str, Any]]] = mapped_column(
        JSONB, server_default=text("'[]'::jsonb")
    )
    # Its manager, for hierarchical routing; a deleted manager leaves its reports without.
    reports_to: Mapped[str | None] = mapped_column(
        Text, ForeignKey("agents.id", ondelete="SET NULL")
    )
    # The loop kind its runs use (react, plan_execute, hybrid, auto), and plan_execute's
    # settings ({"planner_model", "executor_model", "max_replans"}).
    execution_loop: Mapped[str] = mapped_column(Text, server_default=text("'react'"))
    plan_execute: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = now_column()
    updated_at: Mapped[datetime] = now_column()


class Conversation(Base):
    """A transcript shared by the runs that continue it."""

    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    # The live context is this compacted prefix ({"through_position", "messages"}) followed
    # by the messages after it; the transcript itself stays append-only (auto-compaction).
    context: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The run journal: working memory the agent edits through its journal tools.
    journal: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = now_column()


class Run(Base):
    """One agent working one turn of a conversation, on a lane."""

    __tablename__ = "runs"
    __table_args__ = (
        one_of("status", RunStatus),
        CheckConstraint("multitask IN ('enqueue', 'reject', 'interrupt')", name="multitask"),
        # One active run per lane, enforced by the database whatever the processes do.
        Index(
            "uq_runs_active_lane",
            "lane",
            unique=True,
            postgresql_where=text(
                "status IN (" + ", ".join(f"'{s.value}'" for s in sorted(RUN_ACTIVE)) + ")"
            ),
        ),
        # Claiming scans queued runs in arrival order; the lane index serves the FIFO check.
        Index("ix_runs_queued_seq", "seq", postgresql_where=text("status = 'queued'")),
        Index(None, "lane", "seq"),
        Index(None, "conversation_id", "seq"),
        Index(None, "agent_id"),
        Index(None, "status"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, Identity(always=True), unique=True)
    agent_id: Mapped[str] = mapped_column(Text, ForeignKey("agents.id"))
    conversation_id: Mapped[str] = mapped_column(Text, ForeignKey("conversations.id"))
    lane: Mapped[str] = mapped_column(Text)
    input: Mapped[str] = mapped_column(Text)
    multitask: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    iteration: Mapped[int] = mapped_column(Integer)
    usage: Mapped[dict[str, Any]] = mapped_column(JSONB)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    result: Mapped[str | None] = mapped_column(Text)
    stop_reason: Mapped[str | None] = mapped_column(Text)
    waiting_for: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    attempt: Mapped[int] = mapped_column(Integer)
    # A failed run retried with backoff waits in the queue until then.
    not_before: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error_log: Mapped[list[dict[str, Any]]] = mapped_column(
        JSONB, server_default=text("'[]'::jsonb")
    )
    parent_run_id: Mapped[str | None] = mapped_column(Text, ForeignKey("runs.id"))
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB)
    cancel_requested: Mapped[bool] = mapped_column(Boolean)
    cancel_requested_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    lease_owner: Mapped[str | None] = mapped_column(Text)
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    lease_token: Mapped[int] = mapped_column(BigInteger)
    resume_available: Mapped[bool] = mapped_column(Boolean)
    system_prompt_hash: Mapped[str | None] = mapped_column(Text)
    # The model it runs on instead of its agent's, when a budget moved it down a tier.
    model_downgrade: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The loop kind driving it ({"kind", "reason"}), fixed when it first starts.
    execution_loop: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # A plan_execute run's plan (runs/schemas/plans.py RunPlan), written with each step's boundary.
    plan: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The W3C trace context (`traceparent`, `tracestate`) of the request that created it.
    trace_context: Mapped[dict[str, str] | None] = mapped_column(JSONB)
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = now_column()
    updated_at: Mapped[datetime] = now_column()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class RunStep(Base):
    """One step of a run's history: all that one boundary of the run decided, in one row.

    The history is the source of truth of a run: the messages it appended to its
    conversation (from `position` on), the tool calls it started or answered (the ledger),
    its counters and the watchers' state, and the events it emitted. The latest resume
    point (`kind` other than `note`) is its checkpoint; its events are its SSE stream, whose
    ids are `seq`."""

    __tablename__ = "run_history"
    __table_args__ = (
        one_of("kind", StepKind),
        one_of("status", RunStatus),
        CheckConstraint("seq >= 1", name="seq"),
        CheckConstraint("(position IS NULL) = (messages IS NULL)", name="messages_have_position"),
        # The transcript of a conversation, in order; one writer per position.
        Index(
            None,
            "conversation_id",
            "position",
            unique=True,
            postgresql_where=text("position IS NOT NULL"),
        ),
    )

    run_id: Mapped[str] = mapped_column(Text, ForeignKey("runs.id"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)  # the run's status once the step was written
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    conversation_id: Mapped[str] = mapped_column(Text)
    position: Mapped[int | None] = mapped_column(Integer)  # of the first message appended
    messages: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)
    # The rest, each key only when the step has it: events, started, completed, forgotten,
    # iteration, usage, loop (the watchers), prompt_hash.
    data: Mapped[dict[str, Any]] = mapped_column(JSONB)


AGENTS = cast(Table, Agent.__table__)
CONVERSATIONS = cast(Table, Conversation.__table__)
RUNS = cast(Table, Run.__table__)
RUN_HISTORY = cast(Table, RunStep.__table__)
