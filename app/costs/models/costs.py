"""What LLM calls cost, rolled up by day, agent, task and its project (empty for a run of
no task, or a task of no project), provider and model: written with each call's step, in
its transaction, so `GET /v1/costs` and the budgets read totals rather than every call."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import cast

from sqlalchemy import BigInteger, Date, Integer, Numeric, Table, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base


class LLMCostDay(Base):
    __tablename__ = "llm_cost_days"

    day: Mapped[date] = mapped_column(Date, primary_key=True)  # UTC
    agent_id: Mapped[str] = mapped_column(Text, primary_key=True)
    project: Mapped[str] = mapped_column(Text, primary_key=True)
    task_id: Mapped[str] = mapped_column(Text, primary_key=True)
    provider: Mapped[str] = mapped_column(Text, primary_key=True)
    model: Mapped[str] = mapped_column(Text, primary_key=True)
    calls: Mapped[int] = mapped_column(Integer)
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_write_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger)
    # Of the priced calls; `unpriced_calls` had no price (their cost is unknown, not zero).
    cost_usd: Mapped[Decimal] = mapped_column(Numeric(24, 9))
    unpriced_calls: Mapped[int] = mapped_column(Integer)


LLM_COST_DAYS = cast(Table, LLMCostDay.__table__)
