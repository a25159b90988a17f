"""LLM costs: each call added to its day's totals (`llm_cost_days`) in the transaction of
the step that records it, and the totals read back grouped by agent, project, model or day.

A batch of calls is one statement: calls of one day, agent, project and model are summed
first (one row each), and the rows are upserted in key order, so two batches touching the
same rows wait for each other instead of deadlocking."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from sqlalchemy import Numeric, func, literal_column, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import LLM_COST_DAYS
from app.schemas.costs import CostGroupBy, CostLine
from app.store.task_runs import lane_projects, lane_task


@dataclass(frozen=True)
class CallCost:
    """One LLM call: whose (the run's agent and lane, for its task's project), the model
    that answered, its tokens and its cost (None: the model has no price)."""

    day: date
    agent_id: str
    lane: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    cost_usd: Decimal | None


_SUMMED = (
    "calls",
    "input_tokens",
    "output_tokens",
    "cache_write_tokens",
    "cache_read_tokens",
    "cost_usd",
    "unpriced_calls",
)


async def record(session: AsyncSession, calls: Sequence[CallCost]) -> set[tuple[str, str]]:
    """Add the calls to their days' totals; the (agent, project) of the priced ones (whose
    budgets may have crossed a threshold)."""
    if not calls:
        return set()
    projects = await lane_projects(session, {call.lane for call in calls})
    totals: dict[tuple[date, str, str, str, str, str], dict[str, Any]] = defaultdict(
        lambda: dict.fromkeys(_SUMMED, 0)
    )
    for call in calls:
        project = projects.get(call.lane, "")
        task = lane_task(call.lane) or ""
        row = totals[(call.day, call.agent_id, project, task, call.provider, call.model)]
        row["calls"] += 1
        row["input_tokens"] += call.input_tokens
        row["output_tokens"] += call.output_tokens
        row["cache_write_tokens"] += call.cache_write_tokens
        row["cache_read_tokens"] += call.cache_read_tokens
        if call.cost_usd is None:
            row["unpriced_calls"] += 1
        else:
            row["cost_usd"] += call.cost_usd
    rows = [
        {
            "day": day,
            "agent_id": agent,
            "project": project,
            "task_id": task,
            "provider": provider,
            "model": model,
            **sums,
        }
        for (day, agent, project, task, provider, model), sums in sorted(totals.items())
    ]
    statement = insert(LLM_COST_DAYS).values(rows)
    table = LLM_COST_DAYS.c
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[
                table.day,
                table.agent_id,
                table.project,
                table.task_id,
                table.provider,
                table.model,
            ],
            set_={name: table[name] + statement.excluded[name] for name in _SUMMED},
        )
    )
    return {
        (call.agent_id, projects.get(call.lane, "")) for call in calls if call.cost_usd is not None
    }


def _key(group: CostGroupBy) -> Any:
    table = LLM_COST_DAYS.c
    keys = {
        CostGroupBy.AGENT: table.agent_id,
        CostGroupBy.PROJECT: table.project,
        CostGroupBy.TASK: table.task_id,
        CostGroupBy.MODEL: table.provider + literal_column("'/'") + table.model,
        CostGroupBy.DAY: func.to_char(table.day, "YYYY-MM-DD"),
        CostGroupBy.MONTH: func.to_char(table.day, "YYYY-MM"),
    }
    return keys[group]


async def totals(
    session: AsyncSession,
    group: CostGroupBy,
    *,
    start: date,
    end: date,
    agent_id: str | None = None,
    project: str | None = None,
    task_id: str | None = None,
) -> list[CostLine]:
    """Totals per group over the days `start` to `end` (both included), largest cost
    first (a day grouping: in date order)."""
    table = LLM_COST_DAYS.c
    key = _key(group).label("key")
    sums = [func.sum(table[name]).label(name) for name in _SUMMED]
    query = select(key, *sums).where(table.day >= start, table.day <= end).group_by(key)
    if agent_id is not None:
        query = query.where(table.agent_id == agent_id)
    if project is not None:
        query = query.where(table.project == project)
    if task_id is not None:
        query = query.where(table.task_id == task_id)
    cost = func.sum(table.cost_usd).cast(Numeric)
    by_date = group in (CostGroupBy.DAY, CostGroupBy.MONTH)
    query = query.order_by(key) if by_date else query.order_by(cost.desc(), key)
    rows = await session.execute(query)
    return [
        CostLine(
            key=row.key,
            calls=int(row.calls),
            input_tokens=int(row.input_tokens),
            output_tokens=int(row.output_tokens),
            cache_write_tokens=int(row.cache_write_tokens),
            cache_read_tokens=int(row.cache_read_tokens),
            cost_usd=float(row.cost_usd),
            unpriced_calls=int(row.unpriced_calls),
        )
        for row in rows
    ]
