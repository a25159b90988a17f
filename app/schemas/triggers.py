"""Trigger shapes: what fires a trigger (a webhook's payload schema, a schedule, a chain's
source) and what it starts (a run or a workflow execution, built from templates).

A template is JSON whose strings may hold `{{ key.path }}` placeholders (the key syntax of
workflow conditions, `engine/triggers/templates.py`): a string that is one placeholder
alone takes the value with its JSON type, one with text around it is text. Nothing in a
template runs; a placeholder that does not parse is refused when the trigger is saved.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.core.fields import Name
from app.core.vocabulary import MisfirePolicy, Multitask, OverlapPolicy, TargetKind
from app.schemas.runs import Lane

TemplateText = Annotated[str, StringConstraints(min_length=1, max_length=200_000)]
CronExpression = Annotated[str, StringConstraints(min_length=9, max_length=200)]
TimeZone = Annotated[str, StringConstraints(min_length=1, max_length=64)]
# The statuses a source ends in that a chain may fire on: a run's that it settles in (or
# is parked in: failed, timed out), an execution's that it finishes in.
SourceStatus = Literal["completed", "failed", "cancelled", "timed_out", "dead_letter"]


class RunTarget(BaseModel):
    """Start a run of `agent_id`, as `POST /v1/runs` would, with `input` rendered from
    the fire's template context."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal[TargetKind.RUN] = TargetKind.RUN
    agent_id: Name
    input: TemplateText = Field(examples=["New issue: {{ payload.issue.title }}"])
    conversation_id: Name | None = Field(
        None,
        description="Every fire continues this conversation; without it each fire starts a "
        "new one.",
    )
    lane: Lane | None = None
    multitask: Multitask = Field(
        Multitask.ENQUEUE, description="What a fire does when the lane is busy (as on a run)."
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="A template: the run's metadata (the fire is added under `trigger`).",
    )
    delay_s: int | None = Field(
        None, ge=1, le=30 * 86_400, description="The run waits this long after the fire."
    )


class WorkflowTarget(BaseModel):
    """Activate the workflow definition `workflow_id` with `context` rendered from the
    fire's template context."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal[TargetKind.WORKFLOW] = TargetKind.WORKFLOW
    workflow_id: Name
    context: dict[str, Any] = Field(
        default_factory=dict,
        description="A template: the activation context.",
        examples=[{"ticket": "{{ payload.ticket }}"}],
    )


Target = Annotated[RunTarget | WorkflowTarget, Field(discriminator="kind")]


class WebhookConfig(BaseModel):
    """`POST /v1/hooks/{trigger_id}` fires it, signed with the trigger's secret."""

    model_config = ConfigDict(extra="forbid")

    payload_schema: dict[str, Any] | None = Field(
        None, description="A JSON Schema the payload must match (422 naming the field)."
    )


class ScheduleConfig(BaseModel):
    """Fire on a cron expression in an IANA time zone, or every `interval_s` seconds."""

    model_config = ConfigDict(extra="forbid")

    cron: CronExpression | None = Field(None, examples=["0 9 * * MON-FRI"])
    interval_s: int | None = Field(None, ge=60, le=366 * 86_400)
    timezone: TimeZone = Field("UTC", examples=["Europe/Berlin"])
    misfire: MisfirePolicy = Field(
        MisfirePolicy.RUN_ONCE,
        description="What happens to fire times missed while no process was up.",
    )
    max_catchup: int = Field(
        10, ge=1, le=100, description="`run_all`: at most this many missed fires."
    )
    overlap: OverlapPolicy = Field(
        OverlapPolicy.SKIP,
        description="What a fire does while the run of the previous fire is still active.",
    )

    @model_validator(mode="after")
    def _cron_or_interval(self) -> ScheduleConfig:
        if (self.cron is None) == (self.interval_s is None):
            raise ValueError("give exactly one of `cron` and `interval_s`")
        return self


def _completed_only() -> list[SourceStatus]:
    return ["completed"]


class ChainConfig(BaseModel):
    """Fire when a run of `agent_id` settles, or an execution of `workflow_id` finishes,
    in one of `statuses`; the source's result is in the template context."""

    model_config = ConfigDict(extra="forbid")

    source: TargetKind = Field(description="Runs (`run`) or workflow executions (`workflow`).")
    agent_id: Name | None = Field(None, description="`source: run`: the agent whose runs fire.")
    workflow_id: Name | None = Field(
        None, description="`source: workflow`: the definition whose executions fire."
    )
    statuses: list[SourceStatus] = Field(
        default_factory=_completed_only,
        min_length=1,
        max_length=5,
        description="An execution ends `completed`, `failed` or `cancelled` only.",
    )

    @model_validator(mode="after")
    def _names_its_source(self) -> ChainConfig:
        if self.source is TargetKind.RUN and (self.agent_id is None or self.workflow_id):
            raise ValueError("a run chain names `agent_id` (and no `workflow_id`)")
        if self.source is TargetKind.WORKFLOW and (self.workflow_id is None or self.agent_id):
            raise ValueError("a workflow chain names `workflow_id` (and no `agent_id`)")
        return self
