"""`/v1/costs`: what LLM calls cost, totalled by agent, project, model or day."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from app.core.errors import ValidationFailed
from app.costs.schemas.costs import CostGroupBy, CostReport, CostTotals
from app.costs.store import costs as cost_store
from app.http.deps import SessionDep, get_principal

router = APIRouter(prefix="/v1/costs", tags=["costs"], dependencies=[Depends(get_principal)])


@router.get("", response_model=CostReport, summary="Costs of LLM calls")
async def get_costs(
    session: SessionDep,
    group_by: CostGroupBy = CostGroupBy.AGENT,
    start: Annotated[
        date | None, Query(description="First day (UTC). Default: the 1st of `end`'s month.")
    ] = None,
    end: Annotated[
        date | None, Query(description="Last day (UTC), included. Default: today.")
    ] = None,
    agent_id: Annotated[str | None, Query(max_length=200)] = None,
    project: Annotated[str | None, Query(max_length=200)] = None,
    task_id: Annotated[str | None, Query(max_length=200)] = None,
) -> CostReport:
    """Tokens and USD of the LLM calls made between two days, grouped. Each call counts on
    the day it was answered (or interrupted), for its run's agent, task and project (a
    task's cost is that of all its runs).
    A model with no price adds to `unpriced_calls`, not to `cost_usd`. A `start` after
    `end` is a 422."""
    last = end or datetime.now(UTC).date()
    first = start or last.replace(day=1)
    if first > last:
        raise ValidationFailed.field("query.start", "must not be after `end`")
    items = await cost_store.totals(
        session,
        group_by,
        start=first,
        end=last,
        agent_id=agent_id,
        project=project,
        task_id=task_id,
    )
    total = CostTotals(
        calls=sum(i.calls for i in items),
        input_tokens=sum(i.input_tokens for i in items),
        output_tokens=sum(i.output_tokens for i in items),
        cache_write_tokens=sum(i.cache_write_tokens for i in items),
        cache_read_tokens=sum(i.cache_read_tokens for i in items),
        cost_usd=round(sum(i.cost_usd for i in items), 9),
        unpriced_calls=sum(i.unpriced_calls for i in items),
    )
    return CostReport(group_by=group_by, start=first, end=last, items=items, total=total)
