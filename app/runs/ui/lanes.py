"""The lanes (`/ui/lanes`): each lane a run holds or waits on, with its holder and the head
of its queue in the order the claim takes it, and one lane's page (`/ui/lanes/{lane}`)
with its queue. Both are live: an event of a run on a lane fetches that lane's card again
(`/ui/lane-card`), the same template either way.

Lanes are listed in the order of their oldest unfinished run, the lane busy the longest
first: unlike a queue's length, that order holds still while a reader pages, and unlike a
lane's name (up to 300 characters of any kind) a run id fits in a page link."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, Response

from app.agents.store import agents as agent_store
from app.core.streams import RUNS_STREAM, lane_stream
from app.dashboard.deps import DbDep, ViewerDep
from app.dashboard.page import NavItem, Page
from app.dashboard.templating import render
from app.events import store as event_store
from app.events import ui as events
from app.runs.store import runs as run_store
from app.runs.store.runs import BusyLane

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = Page(router, NavItem("lanes", "Lanes", "/ui/lanes", order=30))

LANES_PAGE = 50  # lanes per page of the list
QUEUE_PREVIEW = 5  # queued runs a lane's card shows on the list
QUEUE_SHOWN = 200  # queued runs a lane's own page shows (the runs board has them all)

LaneQuery = Annotated[str, Query(min_length=1, max_length=300)]


@router.get("/lanes")
async def lanes_page(
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
    after: Annotated[str | None, Query(max_length=200)] = None,
) -> HTMLResponse:
    """The busy lanes, a page at a time; `after`: the page after the lane whose oldest
    unfinished run is that one."""
    since = await event_store.last_seq(db, RUNS_STREAM)  # before the lanes, as the board
    rows = await run_store.busy_lanes(db, after=after, limit=LANES_PAGE + 1, shown=QUEUE_PREVIEW)
    lanes = rows[:LANES_PAGE]
    context = {
        "section": "lanes",
        **await _cards(db, lanes, full=False),
        "more": lanes[-1].oldest_run_id if len(rows) > LANES_PAGE else None,
        "first_page": after is None,
        "stream": f"/v1/runs/events?last_event_id={since}",
        "events": events.BOARD,
    }
    return render(request, "lanes.html", viewer, context)


@router.get("/lane-card")
async def lane_card(
    request: Request, viewer: ViewerDep, db: DbDep, lane: LaneQuery, full: bool = False
) -> Response:
    """A lane's card as it is now, with the head of its queue (`full`: as its own page
    shows it); 204 once nothing holds or waits on it."""
    shown = QUEUE_SHOWN if full else QUEUE_PREVIEW
    found = await run_store.busy_lanes(db, lane=lane, limit=1, shown=shown)
    if not found:
        return Response(status_code=204)
    (busy,) = found
    return render(request, "_lane.html", viewer, {"lane": busy, **await _cards(db, found, full)})


@router.get("/lanes/{lane:path}")
async def lane_page(
    lane: Annotated[str, Path(min_length=1, max_length=300)],
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
) -> HTMLResponse:
    """One lane, followed on its own stream; a lane nothing holds or waits on is just
    idle (any name is a lane)."""
    since = await event_store.last_seq(db, lane_stream(lane))
    found = await run_store.busy_lanes(db, lane=lane, limit=1, shown=QUEUE_SHOWN)
    context = {
        "section": "lanes",
        "name": lane,
        **await _cards(db, found, full=True),
        "stream": f"/v1/lanes/{quote(lane, safe='')}/events?last_event_id={since}",
        "events": events.LIFECYCLE,
    }
    return render(request, "lane.html", viewer, context)


async def _cards(db: DbDep, lanes: Sequence[BusyLane], full: bool) -> dict[str, object]:
    """What the lane cards show beyond the lanes: their runs' agents' names, and the time
    that tells a delayed run from one that may start."""
    agent_ids = {run.agent_id for lane in lanes for run in lane.runs}
    return {
        "lanes": lanes,
        "agents": await agent_store.names(db, agent_ids),
        "now": datetime.now(UTC),
        "full": full,
    }
