"""ORM tables. Closed vocabularies are text columns guarded by CHECK constraints built from
the enums, so that the database refuses what the code would refuse."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.approval_states import ApprovalKind, ApprovalStatus
from app.db import Base
from app.states import RUN_ACTIVE, RunStatus, TaskStatus
from app.vocabulary import Complexity, CoordinationTopology, Priority, TaskStructure, TaskType
from app.workflow_states import ExecutionStatus, ReviewTimeoutPolicy


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


class Agent(Base):
    """Identity and configuration of an agent: prompt, tools, model, limits."""

    __tablename__ = "agents"

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
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class Conversation(Base):
    """A transcript shared by the runs that continue it."""

    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    # Messages take positions from this counter; its row lock orders concurrent appenders.
    message_count: Mapped[int] = mapped_column(Integer)
    # The live context is this compacted prefix ({"through_position", "messages"}) followed
    # by the messages after it; the transcript itself stays append-only (auto-compaction).
    context: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The run journal: working memory the agent edits through its journal tools (seed 000).
    journal: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = _now()


class Run(Base):
    """One agent working one turn of a conversation, on a lane."""

    __tablename__ = "runs"
    __table_args__ = (
        _one_of("status", RunStatus),
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
    # A failed run retried with backoff waits in the queue until then (seed 004).
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
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Message(Base):
    """One message of a conversation, in the provider-neutral block form."""

    __tablename__ = "messages"
    __table_args__ = (Index(None, "conversation_id", "position", unique=True),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(Text, ForeignKey("conversations.id"))
    position: Mapped[int] = mapped_column(Integer)
    run_id: Mapped[str | None] = mapped_column(Text, ForeignKey("runs.id"))
    role: Mapped[str] = mapped_column(Text)
    content: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = _now()


class ToolCall(Base):
    """The idempotency envelope of one tool call: started before it runs, completed after."""

    __tablename__ = "tool_calls"

    run_id: Mapped[str] = mapped_column(Text, ForeignKey("runs.id"), primary_key=True)
    tool_call_id: Mapped[str] = mapped_column(Text, primary_key=True)
    tool: Mapped[str] = mapped_column(Text)
    arguments: Mapped[dict[str, Any]] = mapped_column(JSONB)
    idempotent: Mapped[bool] = mapped_column(Boolean)
    attempts: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    result: Mapped[str | None] = mapped_column(Text)
    is_error: Mapped[bool] = mapped_column(Boolean)


class Checkpoint(Base):
    """A safe boundary of a run, written in the transaction of the state it describes."""

    __tablename__ = "checkpoints"
    __table_args__ = (
        CheckConstraint(
            "kind IN ('input', 'llm_response', 'tool_result', 'compaction', "
            "'journal_update', 'human_pause', 'final')",
            name="kind",
        ),
        Index(None, "run_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(Text, ForeignKey("runs.id"))
    kind: Mapped[str] = mapped_column(Text)
    iteration: Mapped[int] = mapped_column(Integer)
    message_cursor: Mapped[int] = mapped_column(Integer)
    persisted_message_count: Mapped[int] = mapped_column(Integer)
    system_prompt_hash: Mapped[str] = mapped_column(Text)
    completed_tool_call_ids: Mapped[list[str]] = mapped_column(JSONB)
    loop_counters: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = _now()


class Workflow(Base):
    """A workflow definition (seed 002): a graph of nodes and edges, kept as JSONB."""

    __tablename__ = "workflows"
    __table_args__ = (
        _one_of("review_timeout_policy", ReviewTimeoutPolicy),
        CheckConstraint("review_timeout_s > 0", name="review_timeout_s"),
        CheckConstraint("version >= 1", name="version"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text)
    nodes: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    edges: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    review_timeout_s: Mapped[int] = mapped_column(Integer)
    review_timeout_policy: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class WorkflowExecution(Base):
    """One activation of a definition: per-node status and what each task node waits on.
    `workflow_id` is a plain reference: an execution's history outlives its definition."""

    __tablename__ = "workflow_executions"
    __table_args__ = (
        _one_of("status", ExecutionStatus),
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
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class WorkflowExecutionTask(Base):
    """The task made for a task node; keyed by task so that a task change finds its
    execution with one index lookup."""

    __tablename__ = "workflow_execution_tasks"
    __table_args__ = (Index(None, "execution_id"),)

    task_id: Mapped[str] = mapped_column(Text, primary_key=True)
    execution_id: Mapped[str] = mapped_column(Text, ForeignKey("workflow_executions.id"))
    node_id: Mapped[str] = mapped_column(Text)


class Approval(Base):
    """A question to a person: sign off a task's review, or consent to one tool call.
    Decided once; `version` orders the people and the expiry sweep who answer it."""

    __tablename__ = "approvals"
    __table_args__ = (
        _one_of("kind", ApprovalKind),
        _one_of("status", ApprovalStatus),
        _one_of("timeout_policy", ReviewTimeoutPolicy),
        CheckConstraint(
            "kind <> 'task_review' OR (task_id IS NOT NULL AND review_round IS NOT NULL)",
            name="review_target",
        ),
        CheckConstraint(
            "kind <> 'tool_call' OR (run_id IS NOT NULL AND tool_call_id IS NOT NULL)",
            name="tool_call_target",
        ),
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
    comment: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    decided_by: Mapped[str | None] = mapped_column(Text)
    timeout_s: Mapped[int] = mapped_column(Integer)
    timeout_policy: Mapped[str] = mapped_column(Text)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    escalations: Mapped[int] = mapped_column(Integer)
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = _now()
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


# Typed handles on the tables, for Core statements (bulk writes, executemany).
TASKS = cast(Table, Task.__table__)
TRANSITIONS = cast(Table, TaskTransition.__table__)
EVENTS = cast(Table, Event.__table__)
IDEMPOTENCY_KEYS = cast(Table, IdempotencyKey.__table__)
AGENTS = cast(Table, Agent.__table__)
CONVERSATIONS = cast(Table, Conversation.__table__)
RUNS = cast(Table, Run.__table__)
MESSAGES = cast(Table, Message.__table__)
TOOL_CALLS = cast(Table, ToolCall.__table__)
CHECKPOINTS = cast(Table, Checkpoint.__table__)
WORKFLOWS = cast(Table, Workflow.__table__)
WORKFLOW_EXECUTIONS = cast(Table, WorkflowExecution.__table__)
WORKFLOW_EXECUTION_TASKS = cast(Table, WorkflowExecutionTask.__table__)
APPROVALS = cast(Table, Approval.__table__)
