"""Sprints (`/v1/sprints`): a project's time-boxed backlog of tasks with story points, its
lifecycle, and the velocity of completed sprints (`/v1/projects/{project}/velocity`)."""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from app.core.fields import Name, Text
from app.core.shapes import PatchBody
from app.core.states import SprintStatus, TaskStatus
from app.events.schemas import PersistedEvent, Stamped

MAX_SPRINT_TASKS = 500  # tasks in one sprint's backlog
MAX_STORY_POINTS = 1_000  # of one task

StoryPoints = Annotated[
    int, Field(ge=0, le=MAX_STORY_POINTS, description="The task's size.", examples=[3])
]


AUTO_TRANSITION = (
    "True: the sprint clock moves the sprint from `active` to `in_review` once its end date "
    "is past (at 00:00 UTC of the day after it), as `system:sprint_clock`. Nothing else moves "
    "by itself."
)


def _ends_after_start(value: date | None, info: ValidationInfo) -> date | None:
    start = info.data.get("start_date")
    if value is not None and start is not None and value < start:
        raise ValueError("must not be before start_date")
    return value


class SprintCreate(BaseModel):
    """A sprint, created `planning`. Any number of a project's sprints may be planned at
    once; one at a time is `active`."""

    model_config = ConfigDict(extra="forbid")

    project: Name = Field(description="The project whose tasks it holds.", examples=["atlas"])
    name: Name = Field(examples=["Sprint 14"])
    goal: Text = Field("", examples=["Ship the billing export"])
    start_date: date = Field(description="Its first day.", examples=["2026-12-01"])
    end_date: date = Field(
        description="Its last day (included); not before `start_date`.", examples=["2026-12-14"]
    )
    auto_transition: bool = Field(False, description=AUTO_TRANSITION)

    _end_date = field_validator("end_date")(_ends_after_start)


class SprintPatch(PatchBody):
    """`name`, `goal` and `auto_transition` change until the sprint is completed; its dates
    only while it is `planning` (409 `sprint_locked` otherwise)."""

    name: Name | None = None
    goal: Text | None = None
    start_date: date | None = None
    end_date: date | None = None
    auto_transition: bool | None = Field(None, description=AUTO_TRANSITION)

    _end_date = field_validator("end_date")(_ends_after_start)


class SprintTaskIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(max_length=200, examples=["task_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    story_points: StoryPoints


class SprintTasksAdd(BaseModel):
    """Tasks to commit to, each with its story points; a task already in this sprint gets
    the points given here."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[SprintTaskIn] = Field(min_length=1, max_length=100)

    @field_validator("tasks")
    @classmethod
    def _each_once(cls, tasks: list[SprintTaskIn]) -> list[SprintTaskIn]:
        ids = [t.task_id for t in tasks]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"names a task more than once: {', '.join(repeated)}")
        return tasks


class SprintTransitionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: SprintStatus = Field(description="The next status: each has exactly one.")


class SprintTaskRead(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str
    title: str
    status: TaskStatus = Field(description="The task's status now.")
    story_points: int


class SprintRead(BaseModel):
    """A sprint with its backlog. `committed_points` sums its tasks' points and
    `completed_points` those of its `completed` tasks, as they stand while the sprint
    runs; once it is completed both are its velocity record, fixed at completion."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(examples=["sprint_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    project: str
    name: str
    goal: str
    start_date: date
    end_date: date
    duration_days: int = Field(description="From `start_date` to `end_date`, both included.")
    status: SprintStatus
    auto_transition: bool = Field(description=AUTO_TRANSITION)
    tasks: list[SprintTaskRead] = Field(description="Oldest addition first.")
    committed_points: int
    completed_points: int
    completed_at: datetime | None = Field(description="When it was completed.")
    version: int
    created_at: datetime
    updated_at: datetime


class VelocityRecord(BaseModel):
    """What one completed sprint delivered, fixed when it completed."""

    model_config = ConfigDict(extra="forbid")

    sprint_id: str
    name: str
    start_date: date
    end_date: date
    committed_points: int
    completed_points: int
    completed_at: datetime


class VelocityRead(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project: str
    window: int = Field(description="How many of the newest completed sprints are averaged.")
    average_completed_points: float | None = Field(
        description="The mean of `completed_points` over the newest `window` completed "
        "sprints (fewer when there are fewer); null with none."
    )
    average_committed_points: float | None = Field(
        description="The same mean of `committed_points`."
    )
    sprints_averaged: int
    records: list[VelocityRecord] = Field(description="Newest first, at most `limit`.")


class SprintEventType(StrEnum):
    """Events of `GET /v1/sprints/events`."""

    CREATED = "sprint.created"
    UPDATED = "sprint.updated"  # its name, goal or dates changed
    TASKS_CHANGED = "sprint.tasks_changed"  # tasks joined or left its backlog
    TRANSITIONED = "sprint.transitioned"  # its status moved (to completed: velocity fixed)


class SprintEventData(Stamped):
    sprint: SprintRead = Field(description="The sprint after the change.")
    from_: SprintStatus | None = Field(
        None, alias="from", description="`sprint.transitioned`: the status it left."
    )
    to: SprintStatus | None = Field(
        None, description="`sprint.transitioned`: the status it reached."
    )
    actor: str = Field(description="Who changed it.")


class SprintEvent(PersistedEvent):
    """One event of `GET /v1/sprints/events`."""

    event: SprintEventType
    data: SprintEventData
