"""Trigger shapes: what fires a trigger (a webhook's payload schema, a schedule, a chain's
source) and what it starts (a run or a workflow execution, built from templates).

A template is JSON whose strings may hold `{{ key.path }}` placeholders (the key syntax of
workflow conditions, `triggers/engine/templates.py`): a string that is one placeholder
alone takes the value with its JSON type, one with text around it is text. Nothing in a
template runs; a placeholder that does not parse is refused when the trigger is saved.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StringConstraints,
    TypeAdapter,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

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


# What every kind's create shape has besides its `kind` and `config` (no docstring: a
# shape without one of its own would publish it).
class TriggerCreateFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name = Field(examples=["New issues"])
    description: Text = ""
    enabled: bool = Field(True, description="A disabled trigger does not fire.")
    target: Target


class WebhookTriggerCreate(TriggerCreateFields):
    """Fired by a signed `POST /v1/hooks/{trigger_id}`; the create's response holds the
    secret, once."""

    kind: Literal[TriggerKind.WEBHOOK]
    config: WebhookConfig = Field(default_factory=WebhookConfig)


class ScheduleTriggerCreate(TriggerCreateFields):
    """Fired by a cron expression in a time zone, or every `interval_s` seconds."""

    kind: Literal[TriggerKind.SCHEDULE]
    config: ScheduleConfig


class ChainTriggerCreate(TriggerCreateFields):
    """Fired when a run of an agent settles or an execution of a workflow finishes."""

    kind: Literal[TriggerKind.CHAIN]
    config: ChainConfig


@dataclass(frozen=True)
class KindShapes:
    """A trigger kind's shapes as the API publishes them: its config, and its create and
    read shapes, each of which fixes `kind` to the kind's name (a `Literal`)."""

    config: type[BaseModel]
    create: type[BaseModel]
    read: type[BaseModel]


# The shapes of each registered kind, by name, in the order the kinds were registered. The
# kinds' registry (`triggers/engine/kinds/`) keeps it, as a kind is registered or removed:
# the flat shapes below check a kind's name against it, and publish its unions.
PUBLISHED_KINDS: dict[str, KindShapes] = {}


def _published_union(shape: Literal["create", "read"]) -> Any:
    """A `__get_pydantic_json_schema__`: `oneOf` the registered kinds' `shape`, read when
    the document is built (`published_as`, tagged by `kind`)."""

    def schema(
        cls: type[BaseModel], core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        variants = [getattr(shapes, shape) for shapes in PUBLISHED_KINDS.values()]
        published: JsonSchemaValue = published_as(*variants, tag="kind").__func__(
            cls, core_schema, handler
        )
        return published

    return classmethod(schema)


class _PublishedConfigs:
    """`Annotated[dict[str, Any], _PublishedConfigs()]`: published as the union of the
    registered kinds' configs."""

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        configs = tuple(shapes.config for shapes in PUBLISHED_KINDS.values())
        union: Any = Union[configs]  # noqa: UP007 (a union of a tuple made at run time)
        return handler(TypeAdapter(union).core_schema)


def registered_kind(kind: str) -> str:
    """`kind`, if a kind of that name is registered; else the error a closed enum gives."""
    if kind not in PUBLISHED_KINDS:
        names = [repr(name) for name in PUBLISHED_KINDS]
        expected = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
        raise PydanticCustomError("enum", "Input should be {expected}", {"expected": expected})
    return kind


class TriggerCreate(BaseModel):
    """A new trigger: what fires it (`kind`, with its `config`) and what it starts
    (`target`). Templates in the target are checked now: a placeholder that does not parse,
    or reads a root its kind does not provide, is a 422 naming the field."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    name: Name
    description: Text = ""
    enabled: bool = True
    # Read by kind (and the target by its own `kind`) in `triggers/engine/checks.py`,
    # which names the field at fault as `body.config.…` / `body.target.…`.
    target: dict[str, Any]
    config: dict[str, Any] = Field(default_factory=dict)

    __get_pydantic_json_schema__ = _published_union("create")

    @field_validator("kind")
    @classmethod
    def _registered(cls, kind: str) -> str:
        return registered_kind(kind)


class TriggerPatch(PatchBody):
    """Fields to change; the ones absent stay as they are. `target` and `config` are
    replaced as a whole (a `config` of the trigger's own kind). None may be null; `kind`
    cannot change, and `enabled` changes through `enable` and `disable`."""

    name: Name | None = None
    description: Text | None = None
    target: Annotated[dict[str, Any], PublishedAs(Target)] | None = None
    config: Annotated[dict[str, Any], _PublishedConfigs()] | None = None


# How many of a schedule's next fire times a trigger read through the API shows.
NEXT_FIRES_SHOWN = 5
_NEXT_FIRES = (
    "A schedule's next fire times after the moment it is read (at most "
    f"{NEXT_FIRES_SHOWN}, oldest first, computed then from its config; empty while it is "
    "disabled: a paused schedule fires nothing). `next_fire_at` is the time the scheduler "
    "waits for, which is earlier only while that time is due and not yet fired."
)


# What every kind's read shape has besides its `kind` and `config`.
class TriggerReadFields(BaseModel):
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


class WebhookTriggerRead(TriggerReadFields):
    kind: Literal[TriggerKind.WEBHOOK]
    config: WebhookConfig
    next_fire_times: None = Field(description="Null: a webhook has no fire times.")


class ScheduleTriggerRead(TriggerReadFields):
    kind: Literal[TriggerKind.SCHEDULE]
    config: ScheduleConfig
    next_fire_times: list[datetime] = Field(max_length=NEXT_FIRES_SHOWN, description=_NEXT_FIRES)


class ChainTriggerRead(TriggerReadFields):
    kind: Literal[TriggerKind.CHAIN]
    config: ChainConfig
    next_fire_times: None = Field(description="Null: a chain has no fire times.")


class TriggerRead(TriggerReadFields):
    """A trigger; `config` is its kind's (`WebhookConfig`, `ScheduleConfig`,
    `ChainConfig`)."""

    kind: str
    config: dict[str, Any]

    __get_pydantic_json_schema__ = _published_union("read")


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
