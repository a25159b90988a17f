"""A project's Kanban board (`/ui/projects/{project}/board`), the pieces its script fetches
again when the tasks' stream says a task changed (a column, or the tasks in none), and the
boards' project picker (`/ui/boards`).

Each column shows its count against its WIP limit and its oldest cards, as the API's board
does (the same store read); a card's buttons move it through the API's move route, and a
column's form sets or removes its limit through the API's WIP-limit routes. The board links
its project's sprints and its active sprint."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.agents.store import agents as agent_store
from app.core.states import COLUMN_STATUS, STATUS_COLUMN, TaskStatus, task_path
from app.core.streams import TASK_STREAM
from app.core.vocabulary import BoardColumn, WipMode
from app.dashboard.deps import DbDep, ViewerDep
from app.dashboard.page import NavItem, Page
from app.dashboard.templating import render
from app.db.connection import one_snapshot
from app.events import store as event_store
from app.events import ui as events
from app.sprints.store import sprints as sprint_store
from app.tasks.schemas.boards import COLUMN_SHOWN, BoardColumnRead
from app.tasks.schemas.tasks import TaskRead
from app.tasks.store import boards as board_store
from app.tasks.store import tasks as task_store
from app.tasks.ui.tasks import PROJECT_CHOICES, agents_by_assignee

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = Page(router, NavItem("boards", "Boards", "/ui/boards", order=70))

OFF_BOARD = "off_board"  # the piece that holds the tasks in no column
ProjectPath = Annotated[str, Path(min_length=1, max_length=200)]


@dataclass(frozen=True)
class Column:
    """A column as the page shows it: `fill` is `over` past its WIP limit, `full` at it."""

    read: BoardColumnRead

    @property
    def fill(self) -> str:
        limit = self.read.wip_limit
        if limit is None or self.read.count < limit.limit:
            return ""
        return "over" if self.read.count > limit.limit else "full"

    @property
    def hidden(self) -> int:
        """The column's tasks beyond the cards it shows."""
        return self.read.count - len(self.read.tasks)


def moves(task: TaskRead) -> list[BoardColumn]:
    """The columns a card can be moved to: those the state machine has a way to."""
    return [
        column
        for column, status in COLUMN_STATUS.items()
        if status is not task.status and task_path(task.status, status) is not None
    ]


def _statuses(piece: str) -> Collection[TaskStatus] | None:
    """The statuses a piece of the page shows; None for no piece."""
    if piece == OFF_BOARD:
        return board_store.OFF_BOARD
    known = piece in BoardColumn.__members__.values()
    return [COLUMN_STATUS[BoardColumn(piece)]] if known else None


def _off_board(tasks: list[TaskRead]) -> list[tuple[TaskStatus, list[TaskRead]]]:
    """The tasks in no column, by status (those that have any), in the machine's order."""
    return [
        (status, found)
        for status in board_store.OFF_BOARD
        if (found := [t for t in tasks if t.status is status])
    ]


@router.get("/boards")
async def boards(
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
    project: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    """The projects tasks name, each a link to its board; `project`: that board."""
    if project:
        return RedirectResponse(f"/ui/projects/{quote(project, safe='')}/board", status_code=303)
    projects = await task_store.projects(db, limit=PROJECT_CHOICES)
    return render(request, "boards.html", viewer, {"section": "boards", "projects": projects})


@router.get("/projects/{project:path}/board")
async def board_page(
    project: ProjectPath, request: Request, viewer: ViewerDep, db: DbDep
) -> HTMLResponse:
    # Where the stream stood, read before the tasks: an event committed in between is then
    # both on the page and replayed, never in neither. One snapshot for the whole board.
    await one_snapshot(db)
    since = await event_store.last_seq(db, TASK_STREAM)
    board = await board_store.board(db, project)
    names = await agent_store.names(db)
    active = await sprint_store.active_sprint(db, project)
    context = {
        "section": "boards",
        "project": project,
        "active_sprint": await sprint_store.get_sprint(db, active) if active else None,
        "projects": await task_store.projects(db, limit=PROJECT_CHOICES),
        "columns": [Column(c) for c in board.columns],
        "off_board": _off_board(board.off_board),
        "names": names,
        "agents": agents_by_assignee(names),
        "moves": moves,
        "modes": list(WipMode),
        "shown": COLUMN_SHOWN,
        "pieces": {s.value: STATUS_COLUMN.get(s, OFF_BOARD) for s in TaskStatus},
        "stream": f"/v1/tasks/events?last_event_id={since}",
        "events": events.TASKS,
    }
    return render(request, "kanban.html", viewer, context)


@router.get("/projects/{project:path}/board/{piece}")
async def board_piece(
    project: ProjectPath, piece: str, request: Request, viewer: ViewerDep, db: DbDep
) -> Response:
    """One column as it is now (`backlog` … `done`), or the tasks in none (`off_board`)."""
    statuses = _statuses(piece)
    if statuses is None:
        return Response(status_code=404)
    await one_snapshot(db)
    board = await board_store.board(db, project, statuses)
    context = {
        "project": project,
        "agents": agents_by_assignee(await agent_store.names(db)),
        "moves": moves,
        "modes": list(WipMode),
        "shown": COLUMN_SHOWN,
    }
    if piece == OFF_BOARD:
        context["off_board"] = _off_board(board.off_board)
        return render(request, "_kanban_off_board.html", viewer, context)
    context["column"] = Column(board.columns[0])
    return render(request, "_kanban_column.html", viewer, context)
