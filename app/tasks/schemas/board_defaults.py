"""The board and sprint defaults a workflow definition carries (a template renders them,
a client may write them): the WIP limits its project's columns start with and the sprints
it is worked in."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.bounds import MAX_VELOCITY_WINDOW
from app.core.vocabulary import BoardColumn, WipMode

MAX_SPRINT_DAYS = 90


class WipLimitDefault(BaseModel):
    model_config = ConfigDict(extra="forbid")

    column: BoardColumn = Field(examples=["in_progress"])
    limit: int = Field(ge=1, le=100_000, examples=[3])
    mode: WipMode = WipMode.STRICT


class SprintDefaults(BaseModel):
    model_config = ConfigDict(extra="forbid")

    length_days: int = Field(
        14, ge=1, le=MAX_SPRINT_DAYS, description="A sprint's length, both ends included."
    )
    velocity_window: int = Field(
        3,
        ge=1,
        le=MAX_VELOCITY_WINDOW,
        description="Completed sprints the velocity average spans.",
    )
    auto_transition: bool = Field(
        False, description="Sprints move from active to in_review once their end date is past."
    )


class BoardDefaults(BaseModel):
    """A project's board as the workflow wants it."""

    model_config = ConfigDict(extra="forbid")

    wip_limits: list[WipLimitDefault] = Field(
        default_factory=list, max_length=5, description="Each column at most once."
    )
    sprint: SprintDefaults | None = Field(
        None, description="Set for `agile_kanban`: how its sprints are cut."
    )

    @field_validator("wip_limits")
    @classmethod
    def _each_column_once(cls, limits: list[WipLimitDefault]) -> list[WipLimitDefault]:
        columns = [limit.column for limit in limits]
        repeated = sorted({c.value for c in columns if columns.count(c) > 1})
        if repeated:
            raise ValueError(f"names a column more than once: {', '.join(repeated)}")
        return limits
