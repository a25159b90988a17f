"""A sprint's burn-up (`GET /v1/sprints/{id}/burn-up`): day by day, the points of its
backlog (scope) and of its tasks completed, read from when each task joined the backlog
and when its audit trail says it completed."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

from app.core.states import SprintStatus


class BurnUpPoint(BaseModel):
    """One day of the sprint, counted up to `as_of`."""

    model_config = ConfigDict(extra="forbid")

    date: dt.date
    as_of: dt.datetime = Field(
        description="The moment the day is counted up to: its end (UTC); today: now; a "
        "completed sprint's last day: its completion."
    )
    scope_points: int = Field(
        description="The points of the tasks in its backlog by then (each task's points as "
        "they stand now: they change only while the sprint is planning).",
        examples=[21],
    )
    completed_points: int = Field(
        description="The points of its tasks completed by then.", examples=[8]
    )


class SprintBurnUp(BaseModel):
    """The sprint's days from `start_date` to `end_date`, or to today while that is
    earlier (none before it starts); a completed sprint's end at its completion when that
    came first. A completed sprint's last point is its velocity record (`committed_points`,
    `completed_points`): the work its review finished after `end_date` counts there."""

    model_config = ConfigDict(extra="forbid")

    sprint_id: str = Field(examples=["sprint_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    project: str
    status: SprintStatus
    start_date: dt.date
    end_date: dt.date
    committed_points: int = Field(description="As the sprint shows them (`GET /v1/sprints/{id}`).")
    completed_points: int = Field(description="As the sprint shows them.")
    points: list[BurnUpPoint] = Field(description="One a day, oldest first.")
