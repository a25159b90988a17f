"""Trigger shapes: what fires a trigger (a webhook's payload schema, a schedule, a chain's
source) and what it starts (a run or a workflow execution, built from templates).

A template is JSON whose strings may hold `{{ key.path }}` placeholders (the key syntax of
workflow conditions, `triggers/engine/templates.py`): a string that is one placeholder
alone takes the value with its JSON type, one with text around it is text. Nothing in a
template runs; a placeholder that does not parse is refused when the trigger is saved.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.core.fields import Name, Text
from app.core.schema_variants import PublishedAs, published_as
from app.core.shapes import PatchBody
from app.core.vocabulary import (
    Ceremony,
    FireStatus,
    MisfirePolicy,
    Multitask,
    OverlapPolicy,
    TargetKind,
    TriggerKind,
)
from app.runs.schemas.runs import Lane

TemplateText = Annotated[str, StringConstraints(min_length=1, max_length=200_000)]
CronExpression = Annotated[str, StringConstraints(min_length=9, max_length=200)]
TimeZone = Annotated[str, StringConstraints(min_length=1, max_length=64)]
# The statuses a source ends in that a chain may fire on: a run's that it settles in (or
# is parked in: failed, timed out), an execution's that it finishes in.
SourceStatus = Literal["completed", "failed", "cancelled", "timed_out", "dead_letter"]


class SprintCeremony(BaseModel):
    """The sprint a ceremony is about, put in the fire's template context: `sprint` (as
    `GET /v1/sprints/{id}` shows it: goal, tasks, points) and `velocity` (the project's
    completed sprints and their average)."""

    model_config = ConfigDict(extra="forbid")

    project: Name = Field(examples=["atlas"])
    ceremony: Ceremony = Field(
        description="Which sprint: `planning` the newest being planned; `review` the active "
        "one, else the one in review; `retrospective` the one in review, else in "
        "retrospective. With none, the fire fails and says so."
    )


class RunTarget(BaseModel):
    """Start a run of `agent_id`, as `POST /v1/runs` would, with `input` rendered from
    the fire's template context."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal[TargetKind.RUN]
    agent_id: Name
    # Examples read only what every kind of trigger has (`trigger`, `fired_at`): a
    # webhook's `payload`, a schedule's `fire_time`, a chain's `source` are each one kind's.
    input: TemplateText = Field(examples=["{{ trigger.name }} fired at {{ fired_at }}"])
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
    sprint: SprintCeremony | None = Field(
        None,
        description="A sprint ceremony: the sprint's data joins the template context "
        "(`{{ sprint.goal }}`, `{{ sprint.committed_points }}`, `{{ velocity.average_completed "
        "}}`), so a schedule can start a facilitator agent's planning, review or "
        "retrospective.",
    )


class WorkflowTarget(BaseModel):
    """Activate the workflow definition `workflow_id` with `context` rendered from the
    fire's template context."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal[TargetKind.WORKFLOW]
    workflow_id: Name
    context: dict[str, Any] = Field(
        default_factory=dict,
        description="A template: the activation context.",
        examples=[{"requested_at": "{{ fired_at }}", "by": "{{ trigger.name }}"}],
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


# -- the trigger resource --------------------------------------------------------------

_SECRET = (
    "A webhook's signing secret (`whsec_…`): in the responses of its create and of "
    "`rotate-secret` only, null elsewhere. Sign each delivery with it (see "
    "`POST /v1/hooks/{trigger_id}`)."
)


class _TriggerCreateFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name = Field(examples=["New issues"])
    description: Text = ""
    enabled: bool = Field(True, description="A disabled trigger does not fire.")
    target: Target


class WebhookTriggerCreate(_TriggerCreateFields):
    """Fired by a signed `POST /v1/hooks/{trigger_id}`; the create's response holds the
    secret, once."""

    kind: Literal[TriggerKind.WEBHOOK]
    config: WebhookConfig = Field(default_factory=WebhookConfig)


class ScheduleTriggerCreate(_TriggerCreateFields):
    """Fired by a cron expression in a time zone, or every `interval_s` seconds."""

    kind: Literal[TriggerKind.SCHEDULE]
    config: ScheduleConfig


class ChainTriggerCreate(_TriggerCreateFields):
    """Fired when a run of an agent settles or an execution of a workflow finishes."""

    kind: Literal[TriggerKind.CHAIN]
    config: ChainConfig


class TriggerCreate(BaseModel):
    """A new trigger: what fires it (`kind`, with its `config`) and what it starts
    (`target`). Templates in the target are checked now: a placeholder that does not parse,
    or reads a root its kind does not provide, is a 422 naming the field."""

    model_config = ConfigDict(extra="forbid")

    kind: TriggerKind
    name: Name
    description: Text = ""
    enabled: bool = True
    # Read by kind (and the target by its own `kind`) in `triggers/engine/commands.py`,
    # which names the field at fault as `body.config.…` / `body.target.…`.
    target: dict[str, Any]
    config: dict[str, Any] = Field(default_factory=dict)

    __get_pydantic_json_schema__ = published_as(
        WebhookTriggerCreate, ScheduleTriggerCreate, ChainTriggerCreate, tag="kind"
    )


ConfigOfAnyKind = WebhookConfig | ScheduleConfig | ChainConfig


class TriggerPatch(PatchBody):
    """Fields to change; the ones absent stay as they are. `target` and `config` are
    replaced as a whole (a `config` of the trigger's own kind). None may be null; `kind`
    cannot change, and `enabled` changes through `enable` and `disable`."""

    name: Name | None = None
    description: Text | None = None
    target: Annotated[dict[str, Any], PublishedAs(Target)] | None = None
    config: Annotated[dict[str, Any], PublishedAs(ConfigOfAnyKind)] | None = None


# How many of a schedule's next fire times a trigger read through the API shows.
NEXT_FIRES_SHOWN = 5
_NEXT_FIRES = (
    "A schedule's next fire times after the moment it is read (at most "
    f"{NEXT_FIRES_SHOWN}, oldest first, computed then from its config; empty while it is "
    "disabled: a paused schedule fires nothing). `next_fire_at` is the time the scheduler "
    "waits for, which is earlier only while that time is due and not yet fired."
)


class _TriggerReadFields(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str = Field(examples=["trg_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    name: str
    description: str
    enabled: bool
    target: Target
    secret: str | None = Field(None, description=_SECRET)
    next_fire_at: datetime | None = Field(
        description="A schedule's next fire time (null while disabled, and for other kinds)."
    )
    next_fire_times: list[datetime] | None = Field(
        None, description=f"{_NEXT_FIRES} Null for other kinds."
    )
    last_fired_at: datetime | None = Field(description="When it last fired (any outcome).")
    version: int
    created_at: datetime
    updated_at: datetime


class WebhookTriggerRead(_TriggerReadFields):
    kind: Literal[TriggerKind.WEBHOOK]
    config: WebhookConfig
    next_fire_times: None = Field(description="Null: a webhook has no fire times.")


class ScheduleTriggerRead(_TriggerReadFields):
    kind: Literal[TriggerKind.SCHEDULE]
    config: ScheduleConfig
    next_fire_times: list[datetime] = Field(max_length=NEXT_FIRES_SHOWN, description=_NEXT_FIRES)


class ChainTriggerRead(_TriggerReadFields):
    kind: Literal[TriggerKind.CHAIN]
    config: ChainConfig
    next_fire_times: None = Field(description="Null: a chain has no fire times.")


class TriggerRead(_TriggerReadFields):
    """A trigger; `config` is its kind's (`WebhookConfig`, `ScheduleConfig`,
    `ChainConfig`)."""

    kind: TriggerKind
    config: dict[str, Any]

    __get_pydantic_json_schema__ = published_as(
        WebhookTriggerRead, ScheduleTriggerRead, ChainTriggerRead, tag="kind"
    )

    def schedule(self) -> ScheduleConfig:
        """The config of a schedule (ValueError for another kind)."""
        if self.kind is not TriggerKind.SCHEDULE:
            raise ValueError(f"trigger {self.id} is a {self.kind.value} trigger")
        return ScheduleConfig.model_validate(self.config)

    def chain(self) -> ChainConfig:
        """The config of a chain (ValueError for another kind)."""
        if self.kind is not TriggerKind.CHAIN:
            raise ValueError(f"trigger {self.id} is a {self.kind.value} trigger")
        return ChainConfig.model_validate(self.config)

    def webhook(self) -> WebhookConfig:
        """The config of a webhook (ValueError for another kind)."""
        if self.kind is not TriggerKind.WEBHOOK:
            raise ValueError(f"trigger {self.id} is a {self.kind.value} trigger")
        return WebhookConfig.model_validate(self.config)


# -- fires -----------------------------------------------------------------------------


class FireRead(BaseModel):
    """One fire of a trigger, as its fire log shows it."""

    model_config = ConfigDict(from_attributes=True)

    id: str = Field(examples=["fire_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    trigger_id: str
    fire_key: str = Field(
        description="The occasion: a webhook's delivery id (`delivery:<id>`) or signature "
        "(`signature:<hex>`), a schedule's fire time, a chain's source; unique per trigger."
    )
    status: FireStatus
    fired_at: datetime
    scheduled_for: datetime | None = Field(description="A schedule's fire time.")
    run_id: str | None = Field(description="The run it started (a run target).")
    execution_id: str | None = Field(description="The execution it started (a workflow target).")
    source_id: str | None = Field(
        None, description="A chain's fire: the run or execution whose end fired it."
    )
    error: str | None = Field(description="`failed`: why; `skipped`: the policy that said no.")


class HookAccepted(BaseModel):
    """A webhook delivery, accepted: what its fire started. A repeat of its delivery id
    gets this same answer again (`Idempotent-Replayed: true`) and starts nothing."""

    fire_id: str
    status: FireStatus = Field(
        description="`started`; `failed` when the target could not start (`error` says why)."
    )
    run_id: str | None
    execution_id: str | None
    error: str | None
