"""What LLM calls cost, totalled: `GET /v1/costs`."""

from __future__ import annotations

from datetime import date
from enum import StrEnum

from pydantic import BaseModel, Field


class CostGroupBy(StrEnum):
    AGENT = "agent"
    PROJECT = "project"
    TASK = "task"
    MODEL = "model"
    DAY = "day"
    MONTH = "month"


class CostTotals(BaseModel):
    calls: int = Field(description="LLM calls, interrupted ones included.")
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    cost_usd: float = Field(description="USD of the priced calls.")
    unpriced_calls: int = Field(
        description="Calls of a model with no price: their cost is not in `cost_usd` (not "
        "known, not zero). Prices are set in `LOOPWRIGHT_COSTS__PRICES`."
    )


class CostLine(CostTotals):
    key: str = Field(
        description="The agent's id, the project (empty: runs of no project's task), the "
        "task's id (empty: runs of no task), `provider/model`, the day (`YYYY-MM-DD`, UTC) or "
        "the month (`YYYY-MM`).",
        examples=["anthropic/claude-sonnet-4-5"],
    )


class CostReport(BaseModel):
    group_by: CostGroupBy
    start: date = Field(description="The first day counted (UTC).")
    end: date = Field(description="The last day counted (UTC), included.")
    items: list[CostLine] = Field(
        description="One line per group, the costliest first (by day or month: in date order)."
    )
    total: CostTotals
