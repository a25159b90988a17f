"""How the OpenAPI document describes each event stream: its 200 is `text/event-stream`,
whose description names the events it sends, and whose events are a named schema (one
event's model, or the union of them) in `components.schemas`.

OpenAPI 3.1 has no place for the schema of one event of a stream (3.2 adds the media
type's `itemSchema`, which 3.1 validators refuse), so it is given as `x-itemSchema`, and
the body itself as what it is to a generic client: text. A generated client gets a model
per event (`RunStreamEvent`, …) to read each decoded event into.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel

from app.costs.schemas.budgets import BudgetEvent
from app.events.schemas import (
    ApprovalEvent,
    CoordinationRunEvent,
    CoordinationSettledEvent,
    CoordinationStartedEvent,
    ExecutionEvent,
    NodeChangedEvent,
    PhaseCompletedEvent,
    SubtaskStartedEvent,
    TaskEvent,
    TriggerEvent,
    WipLimitChangedEvent,
)
from app.runs.schemas.run_events import (
    MessageCreatedEvent,
    MessageDeltaEvent,
    PlanEvent,
    ReconcileEvent,
    RunDiagnosticEvent,
    RunLifecycleEvent,
    ToolCallCompletedEvent,
    ToolCallStartedEvent,
)
from app.sprints.schemas.sprints import SprintEvent
from app.webhooks.schemas import WebhookDeliveryEvent
from app.workspaces.schemas import WorktreeEvent

REF = "#/components/schemas/{model}"


@dataclass(frozen=True)
class EventStream:
    """The events one kind of stream sends: `name` is the schema of one event, the only
    model of `events` or else their union."""

    name: str
    events: tuple[type[BaseModel], ...]
    about: str = ""

    def response(self) -> dict[str, Any]:
        """The 200 response of the stream's operation."""
        names = ", ".join(f"`{name}`" for event in self.events for name in event_names(event))
        return {
            "description": f"Server-Sent Events: {names}. Each is a `{self.name}` once its "
            "`data` (one line of JSON) is decoded; `id` is its sequence number, for "
            "`Last-Event-ID`. Comment lines (`: ping`) keep the connection open.",
            "content": {
                "text/event-stream": {
                    "schema": {"type": "string"},
                    "x-itemSchema": {"$ref": REF.format(model=self.name)},
                }
            },
        }

    def schemas(self) -> dict[str, Any]:
        """The stream's components: each event's model (and what it refers to), and their
        union when there are several."""
        found: dict[str, Any] = {}
        for event in self.events:
            schema = event.model_json_schema(ref_template=REF, mode="serialization")
            found.update(schema.pop("$defs", {}))
            found[event.__name__] = schema
        if len(self.events) > 1:
            found[self.name] = _union(self)
        return found


def event_names(event: type[BaseModel]) -> list[str]:
    """The event types a model stands for: its `event` field's enum or literal values;
    `agent.*` for a pattern."""
    annotation = event.model_fields["event"].annotation
    if inspect.isclass(annotation) and issubclass(annotation, Enum):
        return [str(member.value) for member in annotation]
    values = typing.get_args(annotation)
    if values:
        return [str(value) for value in values]
    return ["agent.*"]


def _union(stream: EventStream) -> dict[str, Any]:
    refs = [{"$ref": REF.format(model=event.__name__)} for event in stream.events]
    union: dict[str, Any] = {"oneOf": refs, "title": stream.name}
    if stream.about:
        union["description"] = stream.about
    if "agent.*" not in [name for event in stream.events for name in event_names(event)]:
        mapping = {
            name: REF.format(model=event.__name__)
            for event in stream.events
            for name in event_names(event)
        }
        union["discriminator"] = {"propertyName": "event", "mapping": mapping}
    return union


TASKS = EventStream(
    "TaskBoardEvent",
    (TaskEvent, WipLimitChangedEvent),
    "One event of `GET /v1/tasks/events`: tasks' changes and the boards' WIP limits.",
)
APPROVALS = EventStream("ApprovalEvent", (ApprovalEvent,))
TRIGGERS = EventStream("TriggerEvent", (TriggerEvent,))
WEBHOOKS = EventStream("WebhookDeliveryEvent", (WebhookDeliveryEvent,))
BUDGETS = EventStream("BudgetEvent", (BudgetEvent,))
SPRINTS = EventStream("SprintEvent", (SprintEvent,))
WORKTREES = EventStream("WorktreeEvent", (WorktreeEvent,))
WORKFLOW_EXECUTION = EventStream(
    "WorkflowExecutionEvent",
    (ExecutionEvent, NodeChangedEvent),
    "One event of `GET /v1/workflow-executions/{id}/events`.",
)
COORDINATION = EventStream(
    "CoordinationEvent",
    (
        CoordinationStartedEvent,
        PhaseCompletedEvent,
        SubtaskStartedEvent,
        CoordinationRunEvent,
        CoordinationSettledEvent,
    ),
    "One event of `GET /v1/coordinations/{id}/events`.",
)
RUNS_BOARD = EventStream(
    "RunBoardEvent",
    (RunLifecycleEvent, ReconcileEvent),
    "One event of `GET /v1/runs/events`: every run's lifecycle (with `lane`, no details), "
    "and the reconciler's passes.",
)
LANE = EventStream("RunLifecycleEvent", (RunLifecycleEvent,))
RUN = EventStream(
    "RunStreamEvent",
    (
        RunLifecycleEvent,
        MessageCreatedEvent,
        ToolCallStartedEvent,
        ToolCallCompletedEvent,
        MessageDeltaEvent,
        PlanEvent,
        RunDiagnosticEvent,
    ),
    "One event of `GET /v1/runs/{id}/events`: tell them apart by `event`.",
)
EVENT_STREAMS = (
    TASKS,
    APPROVALS,
    TRIGGERS,
    WORKFLOW_EXECUTION,
    COORDINATION,
    RUNS_BOARD,
    LANE,
    RUN,
    WEBHOOKS,
    BUDGETS,
    SPRINTS,
    WORKTREES,
)
