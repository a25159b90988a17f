"""Budgets: what an agent or a project may spend on LLM calls a day or a month; the
reservations of calls in flight against them; and the alerts sent at 50, 80 and 100 %.

What was spent is not stored here: it is `llm_cost_days`, summed over the budget's
period. A reservation counts while its run is `running` (a crashed run's reservation
stops counting when the run does), and goes when the call it was made for is counted."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import cast

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Date,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Numeric,
    SmallInteger,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.vocabulary import BudgetPeriod, BudgetScope
from app.db.base import Base
from app.db.columns import now_column, one_of


class Budget(Base):
    __tablename__ = "budgets"
    __table_args__ = (
        UniqueConstraint("scope", "subject", "period"),
        one_of("scope", BudgetScope),
        one_of("period", BudgetPeriod),
        CheckConstraint("limit_usd > 0", name="limit_usd"),
        CheckConstraint("version >= 1", name="version"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    scope: Mapped[str] = mapped_column(Text)
    subject: Mapped[str] = mapped_column(Text)  # the agent's id, or the project
    period: Mapped[str] = mapped_column(Text)
    limit_usd: Mapped[Decimal] = mapped_column(Numeric(24, 9))
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = now_column()
    updated_at: Mapped[datetime] = now_column()


class BudgetReservation(Base):
    """The worst case of one LLM call in flight: its run's agent and project, and the day
    (UTC) it counts on."""

    __tablename__ = "budget_reservations"
    __table_args__ = (
        Index(None, "run_id"),
        Index(None, "agent_id", "day"),
        Index(None, "project", "day"),
        CheckConstraint("amount_usd >= 0", name="amount_usd"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    run_id: Mapped[str] = mapped_column(Text)
    agent_id: Mapped[str] = mapped_column(Text)
    project: Mapped[str] = mapped_column(Text)
    day: Mapped[date] = mapped_column(Date)
    amount_usd: Mapped[Decimal] = mapped_column(Numeric(24, 9))
    created_at: Mapped[datetime] = now_column()


class BudgetAlert(Base):
    """A threshold a budget crossed in one period: sent once."""

    __tablename__ = "budget_alerts"

    budget_id: Mapped[str] = mapped_column(
        Text, ForeignKey("budgets.id", ondelete="CASCADE"), primary_key=True
    )
    period_start: Mapped[date] = mapped_column(Date, primary_key=True)
    threshold: Mapped[int] = mapped_column(SmallInteger, primary_key=True)  # percent
    sent_at: Mapped[datetime] = now_column()


BUDGETS = cast(Table, Budget.__table__)
BUDGET_RESERVATIONS = cast(Table, BudgetReservation.__table__)
BUDGET_ALERTS = cast(Table, BudgetAlert.__table__)
