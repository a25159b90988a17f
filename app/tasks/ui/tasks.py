"""The tasks board (`/ui/tasks`) and a task's page (`/ui/tasks/{id}`), with the fragments
their script fetches when the tasks' stream says a task changed: a card, a task's detail.

The board has one column per status of the task state machine, in the order a task moves
through them, each with its newest `COLUMN_CARDS` tasks; a status's own list
(`?status=`) has them all, a page at a time. A task's page shows its fields, the
transitions the state machine allows it now (buttons that call the API's transition
route), its audit trail, its runs, its coordinations, its worktree (a project with a
workspace), and its parent and child tasks.

Reads go straight to the store, as the API's do; transitions are the API's own route,
called by the page's script."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from app.agents.store import agents as agent_store
from app.coordination import store as coordination_store
from app.core.states import TaskStatus, allowed_targets
from app.core.streams import TASK_STREAM
from app.dashboard.deps import DbDep, ViewerDep
from app.dashboard.page import NavItem, Page
from app.dashboard.templating import render
from app.db.connection import one_snapshot
from app.events import store as event_store
from app.events import ui as events
from app.runs.store import history
from app.tasks.schemas.tasks import TaskRead
from app.tasks.store import task_runs as task_run_store
from app.tasks.store import tasks as task_store
from app.workspaces import store as workspace_store

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = Page(router, NavItem("tasks", "Tasks", "/ui/tasks", order=60))

COLUMN_CARDS = 50  # newest tasks a column of the board shows; its "more" link has the rest
STATUS_PAGE = 50  # tasks per page of one status's list
CHILD_TASKS = 100  # child tasks a task's page lists
COORDINATIONS = 20  # a task's newest coordinations its page lists
PROJECT_CHOICES = 500  # projects the filter offers

# The state machine's statuses, in the order they are declared: a task's way through them.
COLUMNS = list(TaskStatus)

StatusQuery = Annotated[str | None, Query(max_length=40)]
ProjectQuery = Annotated[str | None, Query(max_length=200)]
AgentQuery = Annotated[str | None, Query(max_length=200)]
BeforeQuery = Annotated[str | None, Query(max_length=200)]

# An assignee's agent: its id and name.
AgentRef = tuple[str, str]


@dataclass(frozen=True)
class TaskFilters:
    """The board's filters as the form sends them. A status shows that status's own list
    (an unknown one: the board); an agent matches the tasks assigned to it by its id or by
    its name, as the task runs resolve an assignee."""

    status: TaskStatus | None = None
    project: str | None = None
    agent: str | None = None
    assignees: tuple[str, ...] = ()

    @classmethod
    def parse(
        cls, status: str | None, project: str | None, agent: str | None, names: dict[str, str]
    ) -> TaskFilters:
        known = status if status in TaskStatus.__members__.values() else None
        assignees: tuple[str, ...] = ()
        if agent:  # an agent no longer there still matches the tasks that name its id
            assignees = (agent, names[agent]) if agent in names else (agent,)
        return cls(TaskStatus(known) if known else None, project or None, agent or None, assignees)

    def query(self, **more: str) -> str:
        """The filters (and `more`) as a query string, empty ones left out."""
        values = {"status": self.status or "", "project": self.project, "agent": self.agent}
        return urlencode({k: v for k, v in {**values, **more}.items() if v})

    def matches(self, task: TaskRead) -> bool:
        return all(
            [
                self.status is None or task.status is self.status,
                self.project is None or task.project == self.project,
                not self.assignees or task.assigned_to in self.assignees,
            ]
        )


@dataclass(frozen=True)
class Column:
    """One status's cards; `more`: whether tasks beyond them have that status."""

    status: TaskStatus
    tasks: list[TaskRead]
    more: bool


def agents_by_assignee(names: dict[str, str]) -> dict[str, AgentRef]:
    """The agent an `assigned_to` names, by its id or else its name; of agents sharing a
    name, the oldest (as the task runs resolve it). Any other assignee is a person."""
    by_name = {name: (agent_id, name) for agent_id, name in sorted(names.items(), reverse=True)}
    return by_name | {agent_id: (agent_id, name) for agent_id, name in names.items()}


@router.get("/tasks")
async def tasks_board(
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
    status: StatusQuery = None,
    project: ProjectQuery = None,
    agent: AgentQuery = None,
    before: BeforeQuery = None,
) -> HTMLResponse:
    """Every status's newest tasks; with a status, that status's tasks newest first, a
    page at a time (`before`: the page after that task)."""
    # Where the stream stood, read before the tasks: an event committed in between is then
    # both on the page and replayed, never in neither. One snapshot for all the columns.
    await one_snapshot(db)
    since = await event_store.last_seq(db, TASK_STREAM)
    names = await agent_store.names(db)
    filters = TaskFilters.parse(status, project, agent, names)
    if filters.status is None:
        columns = [await _column(db, s, filters, COLUMN_CARDS, None) for s in COLUMNS]
        older = None
    else:
        columns = [await _column(db, filters.status, filters, STATUS_PAGE, before)]
        listed = columns[0]
        older = filters.query(before=listed.tasks[-1].id) if listed.more else None
    context = {
        "section": "tasks",
        "columns": columns,
        "filters": filters,
        "names": names,
        "agents": agents_by_assignee(names),
        "projects": await task_store.projects(db, limit=PROJECT_CHOICES),
        "older": older,
        "first_page": before is None,
        "stream": f"/v1/tasks/events?last_event_id={since}",
        "events": events.TASKS,
    }
    return render(request, "tasks.html", viewer, context)


@router.get("/tasks/{task_id}/card")
async def task_card(
    task_id: str,
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
    status: StatusQuery = None,
    project: ProjectQuery = None,
    agent: AgentQuery = None,
) -> Response:
    """A card as it is now; 204 when the task is gone or the filters leave it out."""
    task = await task_store.get_task(db, task_id)
    names = await agent_store.names(db)
    if task is None or not TaskFilters.parse(status, project, agent, names).matches(task):
        return Response(status_code=204)
    context = {"task": task, "agents": agents_by_assignee(names)}
    return render(request, "_task_card.html", viewer, context)


@router.get("/tasks/{task_id}")
async def task_page(task_id: str, request: Request, viewer: ViewerDep, db: DbDep) -> HTMLResponse:
    since = await event_store.last_seq(db, TASK_STREAM)  # before the task: see `tasks_board`
    detail = await _detail(db, task_id)
    if detail is None:
        missing = {"section": "tasks", "what": f"task {task_id}"}
        return render(request, "not_found.html", viewer, missing, status_code=404)
    context = {
        "section": "tasks",
        **detail,
        "stream": f"/v1/tasks/events?last_event_id={since}",
        "events": events.TASKS,
    }
    return render(request, "task_page.html", viewer, context)


@router.get("/tasks/{task_id}/detail")
async def task_detail(task_id: str, request: Request, viewer: ViewerDep, db: DbDep) -> Response:
    """Everything of the task's page that changes; 204 once the task is gone."""
    detail = await _detail(db, task_id)
    if detail is None:
        return Response(status_code=204)
    return render(request, "_task_detail.html", viewer, detail)


async def _column(
    db: DbDep, status: TaskStatus, filters: TaskFilters, size: int, before: str | None
) -> Column:
    rows = await task_store.newest_tasks(
        db,
        status=status,
        before_id=before,
        limit=size + 1,
        project=filters.project,
        assignees=filters.assignees,
    )
    return Column(status, rows[:size], len(rows) > size)


async def _detail(db: DbDep, task_id: str) -> dict[str, object] | None:
    """What a task's detail shows: the task, the statuses it can move to now (in the
    board's order), its audit trail, runs, coordinations, worktree, parent and children;
    None when there is no such task."""
    task = await task_store.get_task(db, task_id)
    if task is None:
        return None
    allowed = allowed_targets(
        task.status, retry_count=task.retry_count, max_retries=task.max_retries
    )
    runs = await history.with_live_counters(db, await task_run_store.lane_runs(db, task.id))
    names = await agent_store.names(db)
    parent = await task_store.get_task(db, task.parent_task_id) if task.parent_task_id else None
    children = await task_store.list_tasks(
        db, after_id=None, limit=CHILD_TASKS, filters={"parent_task_id": task.id}
    )
    return {
        "task": task,
        "targets": [status for status in COLUMNS if status in allowed],
        "retries_spent": task.status is TaskStatus.FAILED and not allowed,
        "trail": await task_store.list_transitions(db, task.id),
        "runs": runs[::-1],  # newest first, as the runs board
        "names": names,
        "agents": agents_by_assignee(names),
        "parent": parent,
        "children": children,
        "coordinations": await coordination_store.of_task(db, task.id, limit=COORDINATIONS),
        "worktree": await workspace_store.worktree_of_task(db, task.id),
    }
