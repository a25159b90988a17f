"""Run, message and lane shapes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    computed_field,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.core.bounds import StorableDatetime
from app.core.fields import Name
from app.core.messages import Block, Role
from app.core.schema_variants import published_as
from app.core.states import ResumeDecision, RunStatus, StopReason, WaitReason
from app.core.vocabulary import ExecutionLoopKind, HumanAction, ModelTier, Multitask
from app.runs.schemas.plans import RunPlan

RunInput = Annotated[str, StringConstraints(min_length=1, max_length=200_000)]


def _addressable_lane(lane: str) -> str:
    """`GET /v1/lanes/a/events` is lane `a`'s stream, so a lane named `a/events` could not
    be read: such names are refused. Any other `/` is fine (`team/alpha`)."""
    if lane.endswith("/events"):
        raise PydanticCustomError("lane_name", "a lane's name cannot end in `/events`")
    return lane


# "Does not end in `/events`" for JSON Schema: shorter than 7 characters, or the last 7
# differ from `/events` somewhere (the first difference at each position in turn).
_ANY = r"[\s\S]"
_NOT_EVENTS_SUFFIX = "|".join(
    "/events"[:i] + f"[^{'/events'[i]}]" + (f"{_ANY}{{{6 - i}}}" if i < 6 else "") for i in range(7)
)
LANE_PATTERN = f"^(?:{_ANY}{{0,6}}|{_ANY}*(?:{_NOT_EVENTS_SUFFIX}))$"

Lane = Annotated[
    str,
    StringConstraints(min_length=1, max_length=300),
    AfterValidator(_addressable_lane),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 300, "pattern": LANE_PATTERN}),
]


class RunCreate(BaseModel):
    """Start a run. Without `conversation_id` a new conversation is made; without `lane`
    the run takes `conversation:<conversation_id>`."""

    model_config = ConfigDict(extra="forbid")

    agent_id: Name
    conversation_id: Name | None = None
    lane: Lane | None = None
    input: RunInput = Field(examples=["Summarise the open incidents."])
    multitask: Multitask = Field(
        Multitask.ENQUEUE,
        description="If the lane is busy: wait in line (`enqueue`), refuse with 409 "
        "(`reject`), or cancel what holds or waits on the lane (`interrupt`).",
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    not_before: StorableDatetime | None = Field(
        None,
        description="A delayed run: queued at once, claimed by no worker before this time "
        "(a time already past starts it as soon as its lane is free). It keeps its place in "
        "its lane: later runs on the lane wait behind it.",
        examples=["2030-01-01T09:00:00Z"],
    )


class Usage(BaseModel):
    """What the run's LLM calls used and cost, summed over its calls (an interrupted call
    counts what was billed: its input, at least)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = Field(0, description="Prompt tokens written to the cache.")
    cache_read_tokens: int = Field(0, description="Prompt tokens read from the cache.")
    cost_usd: float | None = Field(
        None,
        description="USD, from the price table (`GET /v1/costs` has the totals). Null when "
        "a call's model has no price (`unpriced_calls` says how many): then the cost is "
        "not known, rather than guessed.",
    )
    unpriced_calls: int = Field(0, description="Calls whose model has no price.")

    @classmethod
    def none_yet(cls) -> dict[str, Any]:
        """A new run's usage, as stored: nothing used, nothing spent."""
        return cls(cost_usd=0.0).model_dump()


class ModelDowngrade(BaseModel):
    """The model a run uses instead of its agent's: a monthly budget it counts against had
    spent `spent_percent` of its limit when the run started, so its large-tier model was
    swapped for the next tier's (and its system prompt follows that tier's profile)."""

    from_model: str
    to_model: str
    from_tier: ModelTier
    to_tier: ModelTier
    budget_id: str
    spent_percent: float


class LoopSelection(BaseModel):
    """The loop kind that drives a run, fixed when it first starts (a resumed run keeps
    it): its agent's `execution_loop`, or what `auto` chose from its task's
    `estimated_complexity` and its tightest monthly budget, with the reason."""

    kind: ExecutionLoopKind
    reason: str = Field(
        examples=["complex → hybrid; a monthly budget is 85 % spent → plan_execute"]
    )


class RunError(BaseModel):
    code: StopReason
    message: str


class WaitingFor(BaseModel):
    """What a run waiting on a person waits for, and the question it asks."""

    reason: WaitReason
    question: str
    tool_call_id: str | None = Field(
        None,
        description="The call the answer becomes the result of (`ask_human`, "
        "`resume_unsafe`), or that waits for approval.",
    )
    tool: str | None = None
    approval_id: str | None = Field(
        None, description="`approval`: decide it at `/v1/approvals/{id}/approve` or `/reject`."
    )


class ErrorLogEntry(BaseModel):
    """A failed attempt, or a time-out (its worker stopped renewing the lease), and what
    followed it."""

    attempt: int
    code: StopReason
    message: str
    at: datetime
    last_checkpoint: str | None = Field(
        None, description="A time-out: the kind of the run's last checkpoint, if any."
    )
    resume: ResumeDecision | None = Field(
        None, description="A time-out: what the reconciler did with the run."
    )


def logged(run: RunRead, entry: ErrorLogEntry) -> list[dict[str, Any]]:
    """The run's error log with `entry` appended, as stored."""
    return [e.model_dump(mode="json", exclude_none=True) for e in [*run.error_log, entry]]


class RunRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    agent_id: str
    conversation_id: str
    lane: str
    input: str
    multitask: Multitask
    status: RunStatus
    iteration: int
    usage: Usage
    result: str | None
    stop_reason: StopReason | None
    error: RunError | None
    waiting_for: WaitingFor | None
    attempt: int
    not_before: datetime | None = Field(
        description="No worker claims the run before then: a delayed run's start, or a "
        "retried run's backoff."
    )
    error_log: list[ErrorLogEntry] = Field(
        description="One entry per failed attempt and per time-out (a lost heartbeat), "
        "with what followed it."
    )
    parent_run_id: str | None
    metadata: dict[str, Any] = Field(validation_alias="metadata_")
    cancel_requested: bool
    cancel_requested_at: datetime | None
    heartbeat_at: datetime | None
    # The worker holding the lease: its host and pid are for logs, not for clients.
    lease_owner: str | None = Field(exclude=True)
    lease_expires_at: datetime | None
    lease_token: int = Field(description="Fencing token: grows with every claim.")
    resume_available: bool
    system_prompt_hash: str | None
    model_downgrade: ModelDowngrade | None = Field(
        None, description="Set when a budget moved the run to a cheaper model."
    )
    execution_loop: LoopSelection | None = Field(
        None, description="The loop kind driving it; null until it first starts."
    )
    plan: RunPlan | None = Field(
        None,
        description="A `plan_execute` run's plan: its steps (each with its status and "
        "result), the current step, the replans so far; null for the other kinds, and "
        "until the planner's plan is accepted.",
    )
    # The W3C context its spans are children of (`traceparent`, `tracestate`): the span that
    # created it, when the creating process traced. `trace_id` is what clients see of it.
    trace_context: dict[str, str] | None = Field(None, exclude=True)
    version: int
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @computed_field(  # type: ignore[prop-decorator]
        description="The OpenTelemetry trace its spans are in (32 hex digits): the trace of "
        "the request that created it (or of the run that spawned it). Null when the process "
        "that created it was not tracing (`OTEL_*` variables)."
    )
    @property
    def trace_id(self) -> str | None:
        parts = (self.trace_context or {}).get("traceparent", "").split("-")
        return parts[1] if len(parts) == 4 else None  # version-trace_id-parent_id-flags


HumanResponseText = Annotated[str, StringConstraints(min_length=1, max_length=100_000)]


class Answer(BaseModel):
    """Give the waiting call its result: `response`."""

    model_config = ConfigDict(extra="forbid")

    action: Literal[HumanAction.ANSWER] = HumanAction.ANSWER
    response: HumanResponseText


class RetryCall(BaseModel):
    """Run the side-effecting call cut short by a crash again; `response` is ignored."""

    model_config = ConfigDict(extra="forbid")

    action: Literal[HumanAction.RETRY_CALL]
    response: HumanResponseText | None = None


class HumanResponse(BaseModel):
    """The answer to the question a run is waiting on. `answer` (the default) gives the
    waiting call its result (`response`). For a side-effecting call cut short by a crash
    (`waiting_for.reason == "resume_unsafe"`), `retry_call` runs it again instead: the
    person has checked that it did not take effect."""

    model_config = ConfigDict(extra="forbid")

    action: HumanAction = HumanAction.ANSWER
    response: HumanResponseText | None = None

    __get_pydantic_json_schema__ = published_as(Answer, RetryCall)

    @model_validator(mode="after")
    def _answer_needs_text(self) -> HumanResponse:
        if self.action is HumanAction.ANSWER and self.response is None:
            raise PydanticCustomError(
                "missing_response", "an answer needs a `response`", {"field": "response"}
            )
        return self


class MessageRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    position: int
    role: Role
    content: list[Block]
    run_id: str | None
    created_at: datetime


class LaneRead(BaseModel):
    """Who holds a lane and who waits behind it, in the order they will run."""

    lane: str
    active: RunRead | None
    queued: list[RunRead]
    last_event_id: int = Field(
        description="Where the lane's stream stood when this was read: follow "
        "`GET /v1/lanes/{lane}/events` from here to miss nothing after it."
    )


class LaneSummary(BaseModel):
    """A lane that a run holds or waits on: its holder and how many wait behind it
    (`GET /v1/lanes/{lane}` lists them)."""

    lane: str
    active: RunRead | None = Field(description="The run holding the lane, if one does.")
    queued: int = Field(description="Runs waiting on the lane.")
    delayed: int = Field(
        description="Of those, runs whose `not_before` is still to come (everything behind "
        "one waits for it too)."
    )
    oldest_run_id: str = Field(
        description="The lane's oldest unfinished run (usually its holder): lanes are "
        "listed in this order."
    )
