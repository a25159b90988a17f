"""The event types each page's EventSource listens to. A browser's EventSource hands a
page only the event types it subscribed to by name, so each page gets the full list of its
stream's types, read from the schemas that publish them."""

from __future__ import annotations

import typing
from enum import Enum

from pydantic import BaseModel

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
    WipLimitChangedEvent,
)
from app.runs.schemas.run_events import (
    DIAGNOSTIC_EVENTS,
    MessageCreatedEvent,
    MessageDeltaEvent,
    PlanEvent,
    ReconcileEvent,
    RunLifecycleEvent,
    ToolCallCompletedEvent,
    ToolCallStartedEvent,
)
from app.sprints.schemas.sprints import SprintEvent
from app.workspaces.schemas import WorktreeEvent


def _names(event: type[BaseModel]) -> list[str]:
    annotation = event.model_fields["event"].annotation
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [str(member.value) for member in annotation]
    return [str(value) for value in typing.get_args(annotation)]


LIFECYCLE = _names(RunLifecycleEvent)
BOARD = [*LIFECYCLE, *_names(ReconcileEvent)]
RUN = [
    *LIFECYCLE,
    *_names(MessageCreatedEvent),
    *_names(MessageDeltaEvent),
    *_names(ToolCallStartedEvent),
    *_names(ToolCallCompletedEvent),
    *_names(PlanEvent),
    *DIAGNOSTIC_EVENTS,
]
APPROVALS = _names(ApprovalEvent)
TASKS = [*_names(TaskEvent), *_names(WipLimitChangedEvent)]
SPRINTS = _names(SprintEvent)
WORKFLOW_EXECUTION = [*_names(ExecutionEvent), *_names(NodeChangedEvent)]
COORDINATION = [
    *_names(CoordinationStartedEvent),
    *_names(PhaseCompletedEvent),
    *_names(SubtaskStartedEvent),
    *_names(CoordinationRunEvent),
    *_names(CoordinationSettledEvent),
]
WORKTREES = _names(WorktreeEvent)
