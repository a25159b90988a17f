"""Budget rows and where each stands: what was spent in its period (`llm_cost_days`) and
what the calls in flight reserved (`budget_reservations` of runs still `running`), the
reservation a call needs before it starts, and the alerts owed once spending crosses a
threshold.

A reservation is made under a lock on the budgets it counts against (taken in id order,
so reservers wait for each other rather than deadlock), then read in a statement of its
own: under READ COMMITTED a statement that waited for the lock reads what the holder
committed. Settling a call (its cost recorded, its reservation deleted) takes no lock: it
can only lower what a reserver counts, since a call costs no more than its worst case."""

from __future__ import annotations

import calendar
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.vocabulary import BudgetPeriod, BudgetScope
from app.costs.models.budgets import BUDGET_ALERTS, BUDGET_RESERVATIONS, BUDGETS
from app.costs.schemas.budgets import ALERT_THRESHOLDS, BudgetRead, BudgetStanding

_STANDING = """
    SELECT b.id, b.scope, b.subject, b.period, b.limit_usd, b.version, b.created_at,
           b.updated_at, w.start AS period_start,
           COALESCE((
               SELECT sum(c.cost_usd) FROM llm_cost_days AS c
               WHERE c.day BETWEEN w.start AND :today
                 AND CASE WHEN b.scope = 'agent' THEN c.agent_id ELSE c.project END = b.subject
           ), 0) AS spent,
           COALESCE((
               SELECT sum(r.amount_usd) FROM budget_reservations AS r
               JOIN runs ON runs.id = r.run_id AND runs.status = 'running'
               WHERE r.day BETWEEN w.start AND :today
                 AND CASE WHEN b.scope = 'agent' THEN r.agent_id ELSE r.project END = b.subject
           ), 0) AS reserved
    FROM budgets AS b
    CROSS JOIN LATERAL (
        SELECT CASE WHEN b.period = 'day' THEN CAST(:today AS date)
                    ELSE CAST(date_trunc('month', CAST(:today AS date)) AS date) END AS start
    ) AS w
"""
_ORDERED = " ORDER BY b.id"


def period_end(period: BudgetPeriod, start: date) -> date:
    if period is BudgetPeriod.DAY:
        return start
    return start.replace(day=calendar.monthrange(start.year, start.month)[1])


@dataclass(frozen=True)
class _Standing:
    """A budget as read, with its sums exact (the API's floats are for showing)."""

    budget: BudgetRead
    limit: Decimal
    spent: Decimal
    reserved: Decimal


def _read(row: Any) -> _Standing:
    limit, spent, reserved = Decimal(row.limit_usd), Decimal(row.spent), Decimal(row.reserved)
    period = BudgetPeriod(row.period)
    standing = BudgetStanding(
        period_start=row.period_start,
        period_end=period_end(period, row.period_start),
        spent_usd=float(spent),
        reserved_usd=float(reserved),
        remaining_usd=float(max(limit - spent - reserved, Decimal(0))),
        spent_percent=float(round(spent * 100 / limit, 2)),
    )
    budget = BudgetRead(
        id=row.id,
        scope=row.scope,
        subject=row.subject,
        period=period,
        limit_usd=float(limit),
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
        current=standing,
    )
    return _Standing(budget, limit, spent, reserved)


async def _standings(
    session: AsyncSession, where: str, params: dict[str, Any], *, today: date, suffix: str = ""
) -> list[_Standing]:
    query = text(_STANDING + " WHERE " + where + (suffix or _ORDERED))
    return [_read(r) for r in await session.execute(query, {**params, "today": today})]


_APPLYING = (
    "(b.scope = 'agent' AND b.subject = :agent_id)"
    " OR (b.scope = 'project' AND b.subject = :project)"
)


# -- rows -----------------------------------------------------------------------------------


async def insert_budget(
    session: AsyncSession, values: dict[str, Any], *, today: date
) -> BudgetRead:
    await session.execute(insert(BUDGETS).values(**values))
    found = await get_budget(session, values["id"], today=today)
    assert found is not None
    return found


async def get_budget(
    session: AsyncSession, budget_id: str, *, today: date, lock: bool = False
) -> BudgetRead | None:
    if lock:
        await session.execute(
            select(BUDGETS.c.id).where(BUDGETS.c.id == budget_id).with_for_update()
        )
    found = await _standings(session, "b.id = :id", {"id": budget_id}, today=today)
    return found[0].budget if found else None


async def list_budgets(
    session: AsyncSession,
    *,
    today: date,
    after_id: str | None,
    limit: int,
    scope: BudgetScope | None = None,
    subject: str | None = None,
) -> list[BudgetRead]:
    clauses, params = ["TRUE"], {}
    if after_id is not None:
        clauses.append("b.id > :after_id")
        params["after_id"] = after_id
    if scope is not None:
        clauses.append("b.scope = :scope")
        params["scope"] = scope.value
    if subject is not None:
        clauses.append("b.subject = :subject")
        params["subject"] = subject
    found = await _standings(
        session, " AND ".join(clauses), params, today=today, suffix=f"{_ORDERED} LIMIT {limit:d}"
    )
    return [f.budget for f in found]


async def update_budget(
    session: AsyncSession, budget_id: str, *, read_version: int, values: dict[str, Any]
) -> bool:
    """Compare-and-set on `version`; False when the row is gone or was changed."""
    stmt = (
        update(BUDGETS)
        .where(BUDGETS.c.id == budget_id, BUDGETS.c.version == read_version)
        .values(**values, version=read_version + 1)
    )
    return bool((await session.execute(stmt.returning(BUDGETS.c.id))).first())


async def delete_budget(session: AsyncSession, budget_id: str, *, read_version: int) -> bool:
    stmt = delete(BUDGETS).where(BUDGETS.c.id == budget_id, BUDGETS.c.version == read_version)
    return bool((await session.execute(stmt.returning(BUDGETS.c.id))).first())


# -- reservations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Spender:
    """Whose call it is: the run, its agent, its task's project (empty: none), the day."""

    run_id: str
    agent_id: str
    project: str
    day: date


async def reserve(session: AsyncSession, spender: Spender, amount: Decimal) -> BudgetRead | None:
    """Reserve `amount` against every budget the call counts against, or (reserving
    nothing) the first budget it does not fit under. The run's earlier reservation, of a
    call that never settled (it failed, or its worker died), is dropped first."""
    await release(session, [spender.run_id])
    params = {"agent_id": spender.agent_id, "project": spender.project}
    locked = await session.execute(
        select(BUDGETS.c.id)
        .where(text(_APPLYING.replace("b.", "budgets.")))
        .order_by(BUDGETS.c.id)
        .with_for_update(),
        params,
    )
    if not locked.first():
        return None
    for found in await _standings(session, _APPLYING, params, today=spender.day):
        if found.spent + found.reserved + amount > found.limit:
            return found.budget
    await session.execute(
        insert(BUDGET_RESERVATIONS).values(
            run_id=spender.run_id,
            agent_id=spender.agent_id,
            project=spender.project,
            day=spender.day,
            amount_usd=amount,
        )
    )
    return None


async def release(session: AsyncSession, run_ids: Sequence[str]) -> None:
    """Drop the runs' reservations: their calls were counted (or will never be)."""
    if run_ids:
        await session.execute(
            delete(BUDGET_RESERVATIONS).where(BUDGET_RESERVATIONS.c.run_id.in_(run_ids))
        )


async def tightest_monthly(
    session: AsyncSession, agent_id: str, project: str, *, today: date
) -> tuple[str, float] | None:
    """The monthly budget this spender counts against that has spent the most of its
    limit, and that percent; None without one."""
    params = {"agent_id": agent_id, "project": project}
    monthly = f"({_APPLYING}) AND b.period = 'month'"
    found = await _standings(session, monthly, params, today=today)
    if not found:
        return None
    tightest = max(found, key=lambda f: f.spent / f.limit)
    return tightest.budget.id, tightest.budget.current.spent_percent


# -- alerts ---------------------------------------------------------------------------------


async def due_alerts(
    session: AsyncSession, spenders: Iterable[tuple[str, str]], *, today: date
) -> list[tuple[BudgetRead, int]]:
    """The thresholds newly crossed by the budgets of these (agent, project) spenders, each
    recorded so that it is owed once a period: (budget, percent)."""
    owed: list[tuple[BudgetRead, int]] = []
    seen: set[str] = set()
    for agent_id, project in sorted(set(spenders)):
        params = {"agent_id": agent_id, "project": project}
        for found in await _standings(session, _APPLYING, params, today=today):
            budget = found.budget
            if budget.id in seen:
                continue
            seen.add(budget.id)
            crossed = [t for t in ALERT_THRESHOLDS if found.spent * 100 >= found.limit * t]
            if not crossed:
                continue
            rows = [
                {
                    "budget_id": budget.id,
                    "period_start": budget.current.period_start,
                    "threshold": t,
                }
                for t in crossed
            ]
            statement = pg_insert(BUDGET_ALERTS).values(rows).on_conflict_do_nothing()
            new = await session.execute(statement.returning(BUDGET_ALERTS.c.threshold))
            owed += [(budget, threshold) for threshold in sorted(t for (t,) in new)]
    return owed
