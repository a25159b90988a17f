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
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.core.fields import Name
from app.core.messages import Block
from app.core.states import RunStatus

Multitask = Literal["enqueue", "reject", "interrupt"]
RunInput = Annotated[str, StringConstraints(min_length=1, max_length=200_000)]


def _addressable_lane(lane: str) -> str:
    """`GET /v1/lanes/a/events` is lane `a`'s stream, so a lane named `a/events` could not
    be read: such names are refused. Any other `/` is fine (`team/alpha`)."""
    if lane.endswith("/events"):
        raise PydanticCustomError("lane_name", "a lane's name cannot end in `/events`")
    return lane


Lane = Annotated[
    str, StringConstraints(min_length=1, max_length=300), AfterValidator(_addressable_lane)
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
        "enqueue",
        description="If the lane is busy: wait in line (`enqueue`), refuse with 409 "
        "(`reject`), or cancel what holds or waits on the lane (`interrupt`).",
    )
    metadata: dict[str, Any] = Field(default_factory=dict)


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0


class RunError(BaseModel):
    code: str
    message: str


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
    stop_reason: str | None
    error: RunError | None
    waiting_for: dict[str, Any] | None
    attempt: int
    not_before: datetime | None = Field(description="A retried run waits in line until then.")
    error_log: list[dict[str, Any]] = Field(
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
    version: int
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class HumanResponse(BaseModel):
    """The answer to the question a run is waiting on. `answer` (the default) gives the
    waiting call its result (`response`). For a side-effecting call cut short by a crash
    (`waiting_for.reason == "resume_unsafe"`), `retry_call` runs it again instead: the
    person has checked that it did not take effect."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["answer", "retry_call"] = "answer"
    response: Annotated[str, StringConstraints(min_length=1, max_length=100_000)] | None = None

    @model_validator(mode="after")
    def _answer_needs_text(self) -> HumanResponse:
        if self.action == "answer" and self.response is None:
            raise PydanticCustomError(
                "missing_response", "an answer needs a `response`", {"field": "response"}
            )
        return self


class MessageRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    position: int
    role: Literal["user", "assistant"]
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
