"""What the event streams (`GET …/events`) send, for the OpenAPI document and its clients:
each Server-Sent Event as a client reads it, with its `data` decoded from JSON. The
server writes them in `app/events/api/streams.py` (`data` is the event's row plus `at`, its
commit time); this module describes tasks', approvals' and workflow executions' events,
`run_events.py` the runs'.

On the wire an event is `id: 42`, `event: task.created`, `data: {...}` (one JSON object);
send the last `id` seen as `Last-Event-ID` to resume after it. A stream also sends
comment lines (`: ping`) to keep the connection open; they are not events.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.approvals.schemas import ApprovalRead
from app.coordination.schemas import PhaseResult
from app.core.states import (
    ApprovalDecision,
    ApprovalStatus,
    ExecutionStatus,
    NodeStatus,
    TaskStatus,
)
from app.core.vocabulary import (
    ApprovalKind,
    AssignmentStrategy,
    BoardColumn,
    CoordinationRunPurpose,
    FireStatus,
    TriggerKind,
    WipMode,
)
from app.tasks.schemas.tasks import TaskRead
from app.workflows.schemas.workflows import ExecutionProgress, ExecutionRead

# `from` is a Python keyword: the fields named so are `from_` with this alias.
_FROM = "from"


class PersistedEvent(BaseModel):
    """An event stored before it was sent: it has an id, and a reconnect replays it."""

    id: str = Field(
        pattern=r"^[0-9]+$",
        description="Its sequence number in the stream: send the last one seen as "
        "`Last-Event-ID` to resume after it.",
        examples=["42"],
    )


class StepEvent(BaseModel):
    """An event of a run: stored before it was sent, in one step of the run's history (its
    lifecycle events are also copied to the runs board and its lane's stream, where each
    has an id of its own)."""

    id: str = Field(
        pattern=r"^[0-9]+(\.[0-9]+)?$",
        description="On a run's stream: the number of the step of the run's history the "
        "event belongs to; the last event of a step has the number alone (`12`), the ones "
        "before it the number and their index (`12.0`, `12.1`). Send the last one seen as "
        "`Last-Event-ID` to resume right after it. On the runs board and a lane's stream: "
        "the event's sequence number there.",
        examples=["12", "12.0"],
    )


class Stamped(BaseModel):
    """The `data` of a persisted event: `at`, when its change was committed, is added to
    what the change recorded."""

    model_config = ConfigDict(populate_by_name=True)

    at: datetime


# -- tasks ---------------------------------------------------------------------------------


class TaskEventType(StrEnum):
    CREATED = "task.created"
    UPDATED = "task.updated"  # its fields changed (PATCH)
    TRANSITIONED = "task.transitioned"  # its status moved
    DELETED = "task.deleted"
    ROUTING_FAILED = "task.routing_failed"  # no agent could take it; it stays `created`
    WIP_LIMIT_EXCEEDED = "task.wip_limit_exceeded"  # past an advisory limit, or recorded


class TaskEventData(Stamped):
    task: TaskRead = Field(description="The task after the change; `task.deleted`: before it.")
    from_: TaskStatus | None = Field(
        None,
        alias=_FROM,
        description="`task.created` (null) and `task.transitioned`: the status it left.",
    )
    to: TaskStatus | None = Field(
        None, description="`task.created` and `task.transitioned`: the status it reached."
    )
    reason: str | None = Field(
        None,
        description="Why it moved, as the mover said; `task.routing_failed`: why no agent "
        "could take it.",
    )
    actor: str | None = Field(None, description="Who moved it: the caller, or the service.")
    strategy: AssignmentStrategy | None = Field(
        None,
        description="`task.routing_failed`, and `task.transitioned` to `assigned` by "
        "routing: the routing strategy.",
    )
    column: BoardColumn | None = Field(
        None, description="`task.wip_limit_exceeded`: the board column it came into."
    )
    wip_limit: int | None = Field(None, description="`task.wip_limit_exceeded`: its limit.")
    count: int | None = Field(
        None, description="`task.wip_limit_exceeded`: the tasks in it now, this one included."
    )


class TaskEvent(PersistedEvent):
    """One event of `GET /v1/tasks/events`."""

    event: TaskEventType
    data: TaskEventData


class WipLimitEventType(StrEnum):
    CHANGED = "board.wip_limit_changed"  # a column's WIP limit was set, changed or removed


class WipLimitChangedData(Stamped):
    project: str
    column: BoardColumn
    limit: int | None = Field(description="The column's limit now; null: it has none.")
    mode: WipMode | None = Field(description="Its mode; null with no limit.")
    actor: str = Field(description="Who changed it.")


class WipLimitChangedEvent(PersistedEvent):
    """A board's WIP limit changed: on `GET /v1/tasks/events`, the board's stream, so an
    open board shows it at once."""

    event: WipLimitEventType
    data: WipLimitChangedData


# -- approvals -----------------------------------------------------------------------------


class ApprovalEventType(StrEnum):
    REQUESTED = "approval.requested"  # a review gate or a gated tool call asked
    APPROVED = "approval.approved"
    REJECTED = "approval.rejected"
    EXPIRED = "approval.expired"  # nobody answered in time; its timeout policy decided
    CANCELLED = "approval.cancelled"  # what it gated moved on without it
    ESCALATED = "approval.escalated"  # its wait ran out and a new one began


class ApprovalEventData(Stamped):
    approval_id: str
    kind: ApprovalKind
    status: ApprovalStatus
    decision: ApprovalDecision | None
    approval: ApprovalRead = Field(description="The approval after the change.")


class ApprovalEvent(PersistedEvent):
    """One event of `GET /v1/approvals/events`."""

    event: ApprovalEventType
    data: ApprovalEventData


# -- workflow executions -------------------------------------------------------------------


class ExecutionEventType(StrEnum):
    STARTED = "workflow.execution.started"
    COMPLETED = "workflow.execution.completed"
    FAILED = "workflow.execution.failed"
    CANCELLED = "workflow.execution.cancelled"


class ExecutionEventData(Stamped):
    execution: ExecutionRead = Field(description="The execution after the change.")


class ExecutionEvent(PersistedEvent):
    """The execution started or finished (its `progress` counts the task nodes done)."""

    event: ExecutionEventType
    data: ExecutionEventData


class NodeChangedData(Stamped):
    node_id: str
    task_id: str | None = Field(description="The task made for the node, if any.")
    from_: NodeStatus = Field(alias=_FROM)
    to: NodeStatus
    progress: ExecutionProgress = Field(
        description="The execution's progress once the change this event is part of is made."
    )


class NodeChangedEvent(PersistedEvent):
    """A node of the execution changed status."""

    event: Literal["workflow.node.changed"]
    data: NodeChangedData


# -- triggers ------------------------------------------------------------------------------


class TriggerEventType(StrEnum):
    FIRED = "trigger.fired"  # its target started
    FIRE_FAILED = "trigger.fire_failed"  # its target could not start (`error` says why)
    FIRE_SKIPPED = "trigger.fire_skipped"  # a policy said no (`error` names it)


class TriggerEventData(Stamped):
    trigger_id: str
    kind: TriggerKind
    fire_id: str
    fire_key: str = Field(description="The occasion (see `FireRead.fire_key`).")
    status: FireStatus
    run_id: str | None = Field(description="The run it started (a run target).")
    execution_id: str | None = Field(description="The execution it started (a workflow target).")
    source_id: str | None = Field(
        None, description="A chain's fire: the run or execution whose end fired it."
    )
    scheduled_for: datetime | None = Field(description="A schedule's fire time.")
    error: str | None


class TriggerEvent(PersistedEvent):
    """One event of `GET /v1/triggers/events`: a trigger fired, failed to, or skipped."""

    event: TriggerEventType
    data: TriggerEventData


# -- coordinations -------------------------------------------------------------------------


class CoordinationData(Stamped):
    coordination_id: str


class CoordinationStartedData(CoordinationData):
    parent_task_id: str
    decomposition_given: bool = Field(
        description="The request gave the subtasks; otherwise the decomposer makes them."
    )


class CoordinationStartedEvent(PersistedEvent):
    """The coordination was accepted; its first phase (decompose) comes next."""

    event: Literal["coordination.started"]
    data: CoordinationStartedData


class PhaseCompletedData(CoordinationData, PhaseResult):
    pass


class PhaseCompletedEvent(PersistedEvent):
    """A phase ended: how (`outcome`), how long it took and what it found (`detail`)."""

    event: Literal["coordination.phase.completed"]
    data: PhaseCompletedData


class SubtaskStartedData(CoordinationData):
    index: int = Field(description="The subtask's index in the decomposition.")
    task_id: str
    agent_id: str
    wave: int


class SubtaskStartedEvent(PersistedEvent):
    """A subtask was assigned to its agent; its run follows on its own lane."""

    event: Literal["coordination.subtask.started"]
    data: SubtaskStartedData


class CoordinationRunData(CoordinationData):
    purpose: CoordinationRunPurpose
    run_id: str
    round: int | None = Field(description="A peer's debate round.")
    index: int | None = Field(description="A peer's subtask.")


class CoordinationRunEvent(PersistedEvent):
    """The coordinator made a run of its own: a peer's debate round or the synthesis."""

    event: Literal["coordination.run.created"]
    data: CoordinationRunData


class CoordinationSettledType(StrEnum):
    COMPLETED = "coordination.completed"
    FAILED = "coordination.failed"
    CANCELLED = "coordination.cancelled"


class CoordinationSettledData(CoordinationData):
    status: ExecutionStatus
    outcome: TaskStatus | None = Field(description="The roll-up's outcome for the parent.")
    reason: str | None


class CoordinationSettledEvent(PersistedEvent):
    """The coordination ended; the parent task moved to match (see its own events)."""

    event: CoordinationSettledType
    data: CoordinationSettledData
