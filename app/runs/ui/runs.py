"""The runs board (`/ui/runs`) and a run's page (`/ui/runs/{id}`), with the fragments their
scripts fetch when the live stream says something changed: a board row, a run's summary
(header, what it waits for, actions), a slice of its transcript. The pages and fragments
share their templates, so a row or a message looks the same rendered first or live.

Reads go straight to the store, as the API's do; actions are the API's own routes, called
by the pages' scripts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.agents.store import agents as agent_store
from app.approvals import store as approval_store
from app.approvals.schemas import ApprovalRead
from app.core.bounds import POSITION_MAX
from app.core.messages import ToolUseBlock
from app.core.states import RUN_SETTLED, RunStatus, WaitReason
from app.core.streams import RUNS_STREAM
from app.dashboard.deps import DbDep, Viewer, ViewerDep
from app.dashboard.page import NavItem, Page
from app.dashboard.templating import render
from app.events import store as event_store
from app.events import ui as events
from app.runs.schemas.runs import MessageRead, RunRead
from app.runs.store import history
from app.runs.store import runs as run_store

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = Page(router, NavItem("runs", "Runs", "/ui/runs", order=20))

BOARD_PAGE = 50  # runs per page of the board
TRANSCRIPT_WINDOW = 50  # messages a run's page opens with; earlier ones page in
LIVE_MESSAGES = 200  # messages one live fetch brings at most (the script fetches again)
TIMELINE_STEPS = 200  # steps of history the timeline replays (all: `?events=all`)
HISTORY_PAGE = 50

Position = Annotated[int | None, Query(ge=0, le=POSITION_MAX)]
# The last position a page shows: -1 before the first message.
After = Annotated[int | None, Query(ge=-1, le=POSITION_MAX)]


@dataclass(frozen=True)
class BoardFilters:
    """The board's filters as the form sends them; an unknown status shows every run."""

    status: RunStatus | None = None
    agent: str | None = None
    lane: str | None = None

    @classmethod
    def parse(cls, status: str | None, agent: str | None, lane: str | None) -> BoardFilters:
        known = status if status in RunStatus.__members__.values() else None
        return cls(RunStatus(known) if known else None, agent or None, lane or None)

    def columns(self) -> dict[str, str]:
        found = {"status": self.status, "agent_id": self.agent, "lane": self.lane}
        return {column: str(value) for column, value in found.items() if value}

    def query(self, **more: str) -> str:
        """The filters (and `more`) as a query string, empty ones left out."""
        values = {"status": self.status or "", "agent": self.agent or "", "lane": self.lane}
        return urlencode({k: v for k, v in {**values, **more}.items() if v})

    def matches(self, run: RunRead) -> bool:
        return all(
            [
                self.status is None or run.status is self.status,
                self.agent is None or run.agent_id == self.agent,
                self.lane is None or run.lane == self.lane,
            ]
        )


StatusQuery = Annotated[str | None, Query(max_length=40)]
AgentQuery = Annotated[str | None, Query(max_length=200)]
LaneQuery = Annotated[str | None, Query(max_length=300)]


@router.get("")
async def home() -> RedirectResponse:
    return RedirectResponse("/ui/overview", status_code=303)


@router.get("/runs")
async def runs_board(
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
    status: StatusQuery = None,
    agent: AgentQuery = None,
    lane: LaneQuery = None,
    before: Annotated[str | None, Query(max_length=200)] = None,
) -> HTMLResponse:
    """Newest first, a page at a time; `before`: the page after that run."""
    filters = BoardFilters.parse(status, agent, lane)
    # Where the board's stream stood, read before the runs: an event committed in between
    # is then both on the page and replayed, never in neither.
    since = await event_store.last_seq(db, RUNS_STREAM)
    rows = await run_store.list_runs(
        db, start=before, limit=BOARD_PAGE + 1, filters=filters.columns(), newest_first=True
    )
    runs = await history.with_live_counters(db, rows[:BOARD_PAGE])
    agents = await agent_store.names(db)
    older = filters.query(before=runs[-1].id) if len(rows) > BOARD_PAGE else None
    context = {
        "section": "runs",
        "runs": runs,
        "agents": agents,
        "filters": filters,
        "statuses": list(RunStatus),
        "older": older,
        "first_page": before is None,
        "stream": f"/v1/runs/events?last_event_id={since}",
        "events": events.BOARD,
    }
    return render(request, "runs.html", viewer, context)


@router.get("/runs/{run_id}/row")
async def run_row(
    run_id: str,
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
    status: StatusQuery = None,
    agent: AgentQuery = None,
    lane: LaneQuery = None,
) -> Response:
    """A board row as it is now; 204 when the run is not (or no longer) on the board the
    filters make."""
    run = await _run(db, run_id)
    if run is None or not BoardFilters.parse(status, agent, lane).matches(run):
        return Response(status_code=204)
    agents = await agent_store.names(db, [run.agent_id])
    return render(request, "_run_row.html", viewer, {"run": run, "agents": agents})


@router.get("/runs/{run_id}")
async def run_page(
    run_id: str,
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
    before: Position = None,
    events_from: Annotated[Literal["recent", "start"], Query(alias="events")] = "recent",
    fork: Position = None,
) -> HTMLResponse:
    """The run's summary, its transcript's last messages (or those before `before`), and
    the timeline of its events: its last `TIMELINE_STEPS` steps replayed, then live."""
    last = await history.last_seq(db, run_id)  # before the run: see `runs_board`
    run = await _run(db, run_id)
    if run is None:
        return _not_found(request, viewer, run_id)
    end = await history.next_position(db, run.conversation_id)
    upto = end if before is None else min(before, end)
    messages, names = await _window(db, run.conversation_id, max(0, upto - TRANSCRIPT_WINDOW), upto)
    replay_from = 0 if events_from == "start" else max(0, last - TIMELINE_STEPS)
    context = {
        "section": "runs",
        **await _summary(db, run, last),
        "messages": messages,
        "names": names,
        "first_position": messages[0].position if messages else upto,
        "last_position": upto - 1,
        "live": upto == end,
        "end": end,
        "replay_from": replay_from,
        "stream": f"/v1/runs/{run.id}/events?keep_open=true&last_event_id={replay_from}",
        "events": events.RUN,
        "fork_from": fork,
    }
    return render(request, "run.html", viewer, context)


@router.get("/runs/{run_id}/summary")
async def run_summary(run_id: str, request: Request, viewer: ViewerDep, db: DbDep) -> Response:
    """The run's header, what it waits for, and the actions its status allows."""
    last = await history.last_seq(db, run_id)
    run = await _run(db, run_id)
    if run is None:
        return Response(status_code=404)
    return render(request, "_run_summary.html", viewer, await _summary(db, run, last))


@router.get("/runs/{run_id}/messages")
async def run_messages(
    run_id: str,
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
    after: After = None,
    before: Position = None,
) -> Response:
    """Transcript items: the messages after position `after` (live), or the window before
    `before` (earlier messages)."""
    run = await _run(db, run_id)
    if run is None:
        return Response(status_code=404)
    if before is not None:
        start, upto = max(0, before - TRANSCRIPT_WINDOW), before
    else:
        start = 0 if after is None else after + 1
        upto = start + LIVE_MESSAGES
    messages, names = await _window(db, run.conversation_id, start, upto)
    context = {"run": run, "messages": messages, "names": names}
    return render(request, "_messages.html", viewer, context)


@router.get("/runs/{run_id}/history")
async def run_history(
    run_id: str, request: Request, viewer: ViewerDep, db: DbDep, after: Position = None
) -> HTMLResponse:
    """The run's steps, a page at a time (`after`: the last step of the page before)."""
    run = await _run(db, run_id)
    if run is None:
        return _not_found(request, viewer, run_id)
    stored = await history.steps(db, run_id, after=after or 0, limit=HISTORY_PAGE + 1)
    steps = [history.step_read(step) for step in stored[:HISTORY_PAGE]]
    more = steps[-1].seq if len(stored) > HISTORY_PAGE else None
    context = {"section": "runs", "run": run, "steps": steps, "more": more, "after": after}
    return render(request, "history.html", viewer, context)


async def _run(db: DbDep, run_id: str) -> RunRead | None:
    run = await run_store.get_run(db, run_id)
    if run is None:
        return None
    (live,) = await history.with_live_counters(db, [run])
    return live


async def _summary(db: DbDep, run: RunRead, last_seq: int) -> dict[str, object]:
    """What the summary shows: the run, its agent's name, the approval it waits on, and
    which actions its status allows."""
    agents = await agent_store.names(db, [run.agent_id])
    waiting = run.waiting_for if run.status is RunStatus.WAITING_ON_HUMAN else None
    approval: ApprovalRead | None = None
    if waiting is not None and waiting.approval_id is not None:
        approval = await approval_store.get_approval(db, waiting.approval_id)
    return {
        "run": run,
        "agent_name": agents.get(run.agent_id),
        "waiting": waiting,
        "approval": approval,
        "asks": waiting is not None and waiting.reason is not WaitReason.APPROVAL,
        "unsafe": waiting is not None and waiting.reason is WaitReason.RESUME_UNSAFE,
        "last_seq": last_seq,
        "settled": run.status in RUN_SETTLED,
        "can_cancel": run.status
        in {RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING_ON_HUMAN}
        and not run.cancel_requested,
        "can_resume": run.status is RunStatus.TIMED_OUT and run.resume_available,
        "can_retry": run.status in {RunStatus.FAILED, RunStatus.DEAD_LETTER, RunStatus.TIMED_OUT},
    }


async def _window(
    db: DbDep, conversation_id: str, start: int, upto: int
) -> tuple[list[MessageRead], dict[str, str]]:
    """Messages `start` to `upto` (excluded), and the names of the tools they call or
    answer: the message before the window is read too, for a result whose call it holds."""
    first = max(0, start - 1)
    read = await history.read_messages(
        db, conversation_id, after=first - 1, limit=max(0, upto - first)
    )
    names = {
        block.id: block.name
        for message in read
        for block in message.content
        if isinstance(block, ToolUseBlock)
    }
    return [m for m in read if m.position >= start], names


def _not_found(request: Request, viewer: Viewer, run_id: str) -> HTMLResponse:
    context = {"section": "runs", "what": f"run {run_id}"}
    return render(request, "not_found.html", viewer, context, status_code=404)
