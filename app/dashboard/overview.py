"""The overview (`/ui/overview`, where `/ui` leads): runs by status, the queue, the
workers, this month's spending and the budgets, this process's circuit breakers and its
background components that restarted or stalled, the last failures and the approvals
waiting on a person. The counts and the breakers are read as
`/metrics` reads them (the same store query, the same breakers). Live: an event on the
runs stream fetches the figures again (`/ui/overview/live`), at most every 1.5 s."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.agents.store import agents as agent_store
from app.approvals import store as approval_store
from app.core.states import RunStatus
from app.core.streams import RUNS_STREAM
from app.costs.schemas.costs import CostGroupBy
from app.costs.store import budgets as budget_store
from app.costs.store import costs as cost_store
from app.dashboard.deps import DbDep, ServicesDep, ViewerDep
from app.dashboard.templating import render
from app.events import store as event_store
from app.events import ui as events
from app.runs.store import run_counts
from app.runs.store import runs as run_store

router = APIRouter(prefix="/ui", include_in_schema=False)

RECENT_FAILURES = 10
BUDGETS_SHOWN = 20  # the rest are a `GET /v1/budgets` away


@dataclass(frozen=True)
class StatusCount:
    """A status's line of the chart."""

    status: RunStatus
    count: int
    share: int  # of the largest count, in percent: the bar's length


@router.get("/overview")
async def overview(
    request: Request, viewer: ViewerDep, db: DbDep, services: ServicesDep
) -> HTMLResponse:
    since = await event_store.last_seq(db, RUNS_STREAM)  # before the figures, as the board
    context = {
        "section": "overview",
        **await _figures(db, services),
        "stream": f"/v1/runs/events?last_event_id={since}",
        "events": events.BOARD,
    }
    return render(request, "overview.html", viewer, context)


@router.get("/overview/live")
async def overview_live(
    request: Request, viewer: ViewerDep, db: DbDep, services: ServicesDep
) -> HTMLResponse:
    """The overview's figures as they are now."""
    return render(request, "_overview.html", viewer, await _figures(db, services))


async def _figures(db: DbDep, services: ServicesDep) -> dict[str, object]:
    counts = await run_counts.count_by_status(db)
    queue = await run_counts.queue_state(db)
    failures = await run_store.recent_failures(db, limit=RECENT_FAILURES)
    now = datetime.now(UTC)
    today = now.date()
    month = await cost_store.totals(db, CostGroupBy.MODEL, start=today.replace(day=1), end=today)
    budgets = await budget_store.list_budgets(db, today=today, after_id=None, limit=BUDGETS_SHOWN)
    return {
        "spending": month,
        "spent": sum(line.cost_usd for line in month),
        "unpriced": sum(line.unpriced_calls for line in month),
        "budgets": budgets,
        "statuses": _bars(counts),
        "counts": counts,
        "queue": queue,
        "waited": _duration((now - queue.waiting_since).total_seconds())
        if queue.waiting_since
        else None,
        "workers": services.settings.workers,
        "breakers": services.breakers.readings(),
        "policy": services.breakers.policy,
        "troubled": [c for c in services.components.readings() if c.restarts or c.stalled],
        "failures": failures,
        "agents": await agent_store.names(db, {run.agent_id for run in failures}),
        "approvals": await approval_store.count_pending(db),
    }


def _bars(counts: dict[RunStatus, int]) -> list[StatusCount]:
    """Every status, with none left out: a count of 0 is news too."""
    largest = max(counts.values(), default=0)
    bars = []
    for status in RunStatus:
        count = counts.get(status, 0)
        bars.append(StatusCount(status, count, round(100 * count / largest) if largest else 0))
    return bars


def _duration(seconds: float) -> str:
    """A wait as a person reads it: its two largest units."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, hours, days = whole // 60, whole // 3600, whole // 86400
    if hours == 0:
        return f"{minutes} min"
    if days == 0:
        return f"{hours} h {minutes % 60} min"
    return f"{days} d {hours % 24} h"
