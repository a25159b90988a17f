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
from sqlalchemy.ext.asyncio import AsyncSession

from app.costs.models.costs import LLM_COST_DAYS
from app.costs.schemas.costs import CostGroupBy, CostLine
from app.db.driver import driver_connection, json_text
from app.tasks.store.task_runs import lane_projects, lane_task


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


# One statement a batch, prepared once (a Core upsert is compiled afresh each time: a
# millisecond of CPU a turn). The rows come in key order: batches wait, never deadlock.
_UPSERT = """
    INSERT INTO llm_cost_days AS d
    SELECT r.day, r.agent_id, r.project, r.task_id, r.provider, r.model, r.calls,
           r.input_tokens, r.output_tokens, r.cache_write_tokens, r.cache_read_tokens,
           r.cost_usd, r.unpriced_calls
    FROM jsonb_to_recordset($1::text::jsonb) AS r(
        day date, agent_id text, project text, task_id text, provider text, model text,
        calls int, input_tokens bigint, output_tokens bigint, cache_write_tokens bigint,
        cache_read_tokens bigint, cost_usd numeric, unpriced_calls int
    )
    ON CONFLICT (day, agent_id, project, task_id, provider, model) DO UPDATE SET
        calls = d.calls + excluded.calls,
        input_tokens = d.input_tokens + excluded.input_tokens,
        output_tokens = d.output_tokens + excluded.output_tokens,
        cache_write_tokens = d.cache_write_tokens + excluded.cache_write_tokens,
        cache_read_tokens = d.cache_read_tokens + excluded.cache_read_tokens,
        cost_usd = d.cost_usd + excluded.cost_usd,
        unpriced_calls = d.unpriced_calls + excluded.unpriced_calls
"""
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
            "cost_usd": str(sums["cost_usd"]),  # exact, as JSON text
        }
        for (day, agent, project, task, provider, model), sums in sorted(totals.items())
    ]
    driver = await driver_connection(session)
    await driver.execute(_UPSERT, json_text(rows))
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
