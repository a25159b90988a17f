"""A project's Kanban board: its columns (each a task status), their WIP limits, and the
moves a client asks for."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.core.bounds import VERSION_MAX
from app.core.fields import Name, Reason
from app.core.states import TaskStatus
from app.core.vocabulary import BoardColumn, WipMode
from app.sprints.schemas.sprints import SprintRead
from app.tasks.schemas.tasks import TaskRead

COLUMN_SHOWN = 200  # tasks listed per column; `count` has them all


class WipLimitSet(BaseModel):
    """At most `limit` of the project's tasks in the column."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(ge=1, le=100_000, examples=[3])
    mode: WipMode = Field(
        WipMode.STRICT,
        description="`strict`: a move past the limit is refused (409 `wip_limit_reached`); "
        "`advisory`: accepted, with a `task.wip_limit_exceeded` event. Either way every "
        "move counts: the API's, an agent's, a run's progress, a workflow's.",
    )


class WipLimitRead(WipLimitSet):
    project: str
    column: BoardColumn


class BoardColumnRead(BaseModel):
    column: BoardColumn
    status: TaskStatus = Field(description="The task status the column shows.")
    count: int = Field(description="The project's tasks in it.")
    wip_limit: WipLimitSet | None
    tasks: list[TaskRead] = Field(description=f"The oldest {COLUMN_SHOWN} of them.")


class BoardRead(BaseModel):
    project: str
    sprint: SprintRead | None = Field(
        description="The sprint the board is filtered to (Agile Kanban), if one was asked."
    )
    columns: list[BoardColumnRead] = Field(description="Backlog to done, in order.")
    off_board: list[TaskRead] = Field(
        description="The project's tasks in no column: blocked, failed, interrupted, "
        f"cancelled (the oldest {COLUMN_SHOWN} of each)."
    )


class MoveRequest(BaseModel):
    """Move a task to a column: it walks the state machine's shortest path there, each
    step in its audit trail, all in one change."""

    model_config = ConfigDict(extra="forbid")

    column: BoardColumn = Field(examples=["in_progress"])
    reason: Reason | None = None
    assigned_to: Name | None = Field(
        None, description="Who takes it, when the path goes through `ready` (assigned)."
    )
    expected_version: int | None = Field(None, ge=1, le=VERSION_MAX)
