"""What the runs' event streams send (see `events.py` for the envelope): a run's
lifecycle (`agent_run.*`, also on its lane's stream and, without details, on the runs
board), and on the run's own stream its messages, tool calls, text previews and the
agent loop's diagnostics (`agent.*`). Every persisted run event carries the run's id and
the status the change left it in (`app/runs/engine/run_transitions.py`)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.messages import Block, Role
from app.core.states import RunStatus, StopReason, WaitReason
from app.core.vocabulary import HumanAction
from app.events.schemas import PersistedEvent, Stamped, StepEvent
from app.runs.schemas.runs import RunError


class RunData(Stamped):
    run_id: str
    status: RunStatus = Field(description="The status the change left the run in.")


class RunLifecycleEventType(StrEnum):
    QUEUED = "agent_run.queued"  # created; waits for its lane
    FORKED = "agent_run.forked"  # made from another run's step (`from_run_id`, `from_seq`)
    STARTED = "agent_run.started"  # a worker began (or went on with) an attempt
    WAITING_ON_HUMAN = "agent_run.waiting_on_human"  # asks a person (`question`, `reason`)
    HUMAN_RESPONSE = "agent_run.human_response"  # a person answered; back to the queue
    APPROVAL_DECIDED = "agent_run.approval_decided"  # its tool call's approval was decided
    RESUME_UNSAFE = "agent_run.resume_unsafe"  # resuming needs a person first
    COMPLETED = "agent_run.completed"
    FAILED = "agent_run.failed"  # an attempt failed; a retry or a dead letter may follow
    RETRY_SCHEDULED = "agent_run.retry_scheduled"  # queued again after `delay_s`
    DEAD_LETTER = "agent_run.dead_letter"  # retries exhausted
    ERROR_LIMIT = "agent_run.error_limit"  # its tool batches kept failing
    ITERATION_LIMIT = "agent_run.iteration_limit"  # it reached `max_iterations`
    CANCEL_REQUESTED = "agent_run.cancel_requested"  # it stops at its next boundary
    CANCELLED = "agent_run.cancelled"
    INTERRUPTED = "agent_run.interrupted"  # its worker shut down; back to the queue
    TIMED_OUT = "agent_run.timed_out"  # its worker stopped renewing the lease
    RESUME = "agent_run.resume"  # a timed-out run continues from its checkpoint
    RESUME_EXHAUSTED = "agent_run.resume_exhausted"  # no more automatic resumes
    RETRY = "agent_run.retry"  # a person sent a failed run back to the queue


class RunLifecycleData(RunData):
    """The run's id and status, and the event's details: each field below is sent with the
    events its description names, and left out otherwise. The runs board
    (`GET /v1/runs/events`) sends no details, only `lane`."""

    lane: str | None = Field(None, description="`queued`; every event on the runs board.")
    attempt: int | None = Field(
        None, description="`started`: the attempt; `retry_scheduled`: the next one."
    )
    resumed: bool | None = Field(
        None, description="`started`: it goes on from a checkpoint of an earlier attempt."
    )
    stop_reason: StopReason | None = Field(
        None, description="`completed`, `failed`, `cancelled` (when the loop settled it)."
    )
    error: RunError | None = Field(None, description="`failed`.")
    delay_s: float | None = Field(None, description="`retry_scheduled`: the backoff.")
    not_before: datetime | None = Field(
        None, description="`queued`: a delayed run is claimed no sooner than this."
    )
    attempts: int | None = Field(None, description="`dead_letter`: the attempts made.")
    question: str | None = Field(None, description="`waiting_on_human`.")
    reason: WaitReason | None = Field(
        None, description="`waiting_on_human`; `resume_unsafe` for a changed prompt."
    )
    tool_call_id: str | None = Field(
        None, description="`human_response`, `approval_decided`, `resume_unsafe`."
    )
    tool: str | None = Field(None, description="`resume_unsafe`: the call cut short.")
    action: HumanAction | None = Field(None, description="`human_response`.")
    approval_id: str | None = Field(None, description="`approval_decided`.")
    decision: str | None = Field(
        None,
        description="`approval_decided`: `approved` or `rejected`, or the approval's status "
        "when it was settled without a decision (`cancelled`).",
    )
    previous_status: RunStatus | None = Field(None, description="`retry`.")
    automatic: bool | None = Field(
        None, description="`resume`: by the reconciler (true) or a person (false)."
    )
    automatic_resumes: int | None = Field(None, description="`resume`, `resume_exhausted`.")
    max_resume_attempts: int | None = Field(None, description="`resume_exhausted`.")
    resume_available: bool | None = Field(None, description="`timed_out`.")
    last_checkpoint: str | None = Field(
        None, description="`timed_out`: the kind of its last checkpoint, if any."
    )
    at_boundary: bool | None = Field(
        None, description="`interrupted`: at one of the loop's boundaries (or in between)."
    )
    max_iterations: int | None = Field(None, description="`iteration_limit`.")
    max_consecutive_error_batches: int | None = Field(None, description="`error_limit`.")
    batches: int | None = Field(None, description="`error_limit`: failed batches in a row.")
    last_errors: list[str] | None = Field(None, description="`error_limit`.")
    from_run_id: str | None = Field(None, description="`forked`: the run it was made from.")
    from_seq: int | None = Field(None, description="`forked`: the step it starts after.")


class RunLifecycleEvent(StepEvent):
    """A run's status changed, or is about to (`cancel_requested`)."""

    event: RunLifecycleEventType
    data: RunLifecycleData


class ReconcileData(Stamped):
    timed_out: int = Field(description="Runs whose worker stopped renewing their lease.")
    resumed: int = Field(description="Of those, requeued to continue from a checkpoint.")
    cancelled: int = Field(description="Runs whose wait for a person ran out.")
    resume_exhausted: int


class ReconcileEvent(PersistedEvent):
    """The reconciler's pass timed out or cancelled runs (their own events follow)."""

    event: Literal["agent_run.reconcile"]
    data: ReconcileData


class MessageCreatedData(RunData):
    position: int
    role: Role
    content: list[Block]


class MessageCreatedEvent(StepEvent):
    """A message joined the conversation (as `GET …/messages` lists it)."""

    event: Literal["message.created"]
    data: MessageCreatedData


class ToolCallStartedData(RunData):
    tool_call_id: str
    tool: str


class ToolCallStartedEvent(StepEvent):
    event: Literal["tool_call.started"]
    data: ToolCallStartedData


class ToolCallCompletedData(RunData):
    tool_call_id: str
    is_error: bool
    attempts: int
    result: str = Field(description="The start of the result (the message has all of it).")


class ToolCallCompletedEvent(StepEvent):
    event: Literal["tool_call.completed"]
    data: ToolCallCompletedData


class MessageDeltaData(BaseModel):
    text: str


class MessageDeltaEvent(BaseModel):
    """A preview of text the model is streaming: not stored, so it has no `id` and a
    reconnect does not replay it (the `message.created` that follows has the text)."""

    event: Literal["message.delta"]
    data: MessageDeltaData


class PlanEventType(StrEnum):
    """A `plan_execute` or `hybrid` run's plan moved (`GET /v1/runs/{id}` shows the plan as
    it stands)."""

    CREATED = "plan.created"  # the planner's plan was accepted; its first step is next
    STEP_STARTED = "plan.step.started"  # the executor began a step
    STEP_COMPLETED = "plan.step.completed"  # the executor gave the step's result
    STEP_FAILED = "plan.step.failed"  # the executor said the step cannot be done
    REPLANNED = "plan.replanned"  # a new plan replaced the steps not completed
    CHECKPOINT = "plan.checkpoint"  # hybrid: the progress after a completed step


class PlanEventData(RunData):
    step: int | None = Field(
        None, description="`step.*`, `checkpoint`: the step's index in the plan."
    )
    goal: str | None = Field(None, description="`step.*`: the step's goal.")
    result: str | None = Field(None, description="`step.completed`: the step's result.")
    reason: str | None = Field(None, description="`step.failed`: why it cannot be done.")
    steps: int | None = Field(None, description="`created`, `replanned`: the plan's steps.")
    replans: int | None = Field(None, description="`replanned`: the replans so far.")
    summary: str | None = Field(
        None, description="`checkpoint`: the steps done so far, each with its result."
    )


class PlanEvent(StepEvent):
    event: PlanEventType
    data: PlanEventData


class RunDiagnosticData(RunData):
    """The run's id and status, and the diagnostic's own fields."""

    # Free-form by design: each diagnostic of the loop's resilience ladders (retries,
    # fallbacks, breakers, compaction, loop and stagnation detection) has fields of its
    # own, for people and dashboards; a client acts on the lifecycle events instead.
    model_config = ConfigDict(extra="allow")


# The diagnostics the loop writes today, by name: a client that must subscribe to each event
# type by name (a browser's EventSource) reads this list. tests/guards/test_event_names.py
# holds it to the names the code writes.
DIAGNOSTIC_EVENTS = (
    "agent.breaker.closed",
    "agent.breaker.opened",
    "agent.budget.downgraded",
    "agent.budget.exhausted",
    "agent.compaction.run",
    "agent.exhaustion.soft_time_limit",
    "agent.llm.abandoned",
    "agent.llm.credentials_refreshed",
    "agent.llm.fallback",
    "agent.llm.max_tokens_adjusted",
    "agent.llm.retry",
    "agent.loop.detected",
    "agent.mcp.server_failed",
    "agent.mcp.server_restarted",
    "agent.mcp.tools_listed",
    "agent.recovery.fired",
    "agent.stagnation.detected",
    "agent.tool.degraded",
    "agent.tool.fallback",
    "agent.tool.retry",
)


class RunDiagnosticEvent(StepEvent):
    """What the agent loop did to keep going: `agent.llm.retry`, `agent.llm.fallback`,
    `agent.tool.retry`, `agent.tool.fallback`, `agent.breaker.opened`,
    `agent.loop.detected`, `agent.stagnation.detected`, `agent.compaction.run`,
    `agent.recovery.fired`, … (new ones may appear: match on the prefix)."""

    event: str = Field(pattern=r"^agent\.")
    data: RunDiagnosticData
