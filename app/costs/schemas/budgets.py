"""Budgets (`/v1/budgets`): what an agent or a project may spend on LLM calls a day or a
month, and where each stands in its current period."""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from app.core.fields import Name
from app.core.shapes import PatchBody
from app.core.vocabulary import BudgetPeriod, BudgetScope
from app.events.schemas import PersistedEvent, Stamped

LimitUsd = Annotated[
    float,
    Field(ge=0.000_001, le=1_000_000_000, description="USD (kept to 9 decimals).", examples=[50]),
]
ALERT_THRESHOLDS = (50, 80, 100)  # percent of the limit spent: an alert each, once a period


class BudgetCreate(BaseModel):
    """A limit on what one agent's runs, or the runs of one project's tasks, may spend on
    LLM calls in a day or a month (UTC). One per scope, subject and period."""

    model_config = ConfigDict(extra="forbid")

    scope: BudgetScope
    subject: Name = Field(
        description="The id of an agent that exists (`scope: agent`), or a project's name "
        "(`scope: project`).",
        examples=["agent_01jd2x7k8m9n0p1q2r3s4t5v6w"],
    )
    period: BudgetPeriod
    limit_usd: LimitUsd


class BudgetPatch(PatchBody):
    """A new limit, from now on: the current period's spending counts against it."""

    limit_usd: LimitUsd | None = None


class BudgetStanding(BaseModel):
    """Where a budget stands in its current period."""

    period_start: date = Field(description="The period's first day (UTC).")
    period_end: date = Field(description="Its last day (UTC), included.")
    spent_usd: float = Field(description="What priced calls cost in the period so far.")
    reserved_usd: float = Field(
        description="The worst case of the calls in flight (their input, and `max_tokens` "
        "of output): a call starts only if it fits under the limit with them."
    )
    remaining_usd: float = Field(description="The limit less what is spent and reserved.")
    spent_percent: float = Field(description="Spent, in percent of the limit.")


class BudgetRead(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(examples=["bgt_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    scope: BudgetScope
    subject: str
    period: BudgetPeriod
    limit_usd: float
    version: int
    created_at: datetime
    updated_at: datetime
    current: BudgetStanding


class BudgetEventType(StrEnum):
    """Events of `GET /v1/budgets/events`."""

    ALERT = "budget.alert"  # a budget's spending crossed 50, 80 or 100 % of its limit


class BudgetAlertData(Stamped):
    budget_id: str
    scope: BudgetScope
    subject: str
    period: BudgetPeriod
    period_start: date
    threshold: int = Field(description="The percent crossed: 50, 80 or 100.")
    spent_usd: float
    limit_usd: float


class BudgetEvent(PersistedEvent):
    """One event of `GET /v1/budgets/events`."""

    event: BudgetEventType
    data: BudgetAlertData


def alert_event(budget: BudgetRead, threshold: int) -> tuple[str, dict[str, Any]]:
    """The `budget.alert` event of a threshold a budget crossed (the stream adds `at`)."""
    data = {
        "budget_id": budget.id,
        "scope": budget.scope.value,
        "subject": budget.subject,
        "period": budget.period.value,
        "period_start": budget.current.period_start.isoformat(),
        "threshold": threshold,
        "spent_usd": budget.current.spent_usd,
        "limit_usd": budget.limit_usd,
    }
    return BudgetEventType.ALERT.value, data
