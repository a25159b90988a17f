"""Sprints in the dashboard: the projects that have sprints (`/ui/sprints`), a project's
sprints with its velocity chart (`/ui/projects/{project}/sprints`), and a sprint
(`/ui/sprints/{id}`): its goal, dates and lifecycle with the next step as a button, its
backlog and its burn-up chart, kept live by the sprints' stream and the tasks'.

Reads go straight to the store, as the API's do (the burn-up is the API's own read, on
the sprints' clock); the button moves the sprint through the API's transition route."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.core.states import SPRINT_ALLOWED, SprintStatus
from app.core.streams import SPRINTS_STREAM, TASK_STREAM
from app.dashboard.deps import DbDep, ServicesDep, Viewer, ViewerDep
from app.dashboard.page import NavItem, Page
from app.dashboard.templating import render
from app.db.connection import one_snapshot
from app.events import store as event_store
from app.events import ui as events
from app.sprints.store import burn_up as burn_up_store
from app.sprints.store import sprints as sprint_store
from app.sprints.ui.charts import burn_up_chart, velocity_chart
from app.tasks.ui.tasks import PROJECT_CHOICES

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = Page(router, NavItem("sprints", "Sprints", "/ui/sprints", order=80))

LIST_PAGE = 50  # sprints per page of a project's list
VELOCITY_SHOWN = 12  # completed sprints in the velocity chart
VELOCITY_WINDOW = 3  # sprints the rolling average spans, as the API's default

ProjectPath = Annotated[str, Path(min_length=1, max_length=200)]
Before = Annotated[str | None, Query(max_length=200)]


@router.get("/sprints")
async def sprints_picker(
    request: Request,
    viewer: ViewerDep,
    db: DbDep,
    project: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    """The projects that have sprints, each with its active sprint; `project`: its list."""
    if project:
        return RedirectResponse(f"/ui/projects/{quote(project, safe='')}/sprints", status_code=303)
    projects = await sprint_store.projects(db, limit=PROJECT_CHOICES)
    return render(request, "sprints.html", viewer, {"section": "sprints", "projects": projects})


@router.get("/projects/{project:path}/sprints")
async def project_sprints(
    project: ProjectPath, request: Request, viewer: ViewerDep, db: DbDep, before: Before = None
) -> HTMLResponse:
    """Newest first, a page at a time (`before`: the page after that sprint), under the
    chart of the newest completed sprints' points and their rolling average."""
    await one_snapshot(db)
    rows = await sprint_store.list_sprints(
        db, project=project, status=None, after_id=before, limit=LIST_PAGE + 1, newest_first=True
    )
    sprints = rows[:LIST_PAGE]
    # The sprints before the oldest shown, too: its point of the average spans them.
    velocity = await sprint_store.velocity_of(
        db, project, window=VELOCITY_WINDOW, limit=VELOCITY_SHOWN + VELOCITY_WINDOW - 1
    )
    context = {
        "section": "sprints",
        "project": project,
        "sprints": sprints,
        "velocity": velocity,
        "chart": velocity_chart(velocity.records, VELOCITY_WINDOW, VELOCITY_SHOWN),
        "older": sprints[-1].id if len(rows) > LIST_PAGE else None,
        "first_page": before is None,
    }
    return render(request, "project_sprints.html", viewer, context)


@router.get("/sprints/{sprint_id}")
async def sprint_page(
    sprint_id: str, request: Request, viewer: ViewerDep, db: DbDep, services: ServicesDep
) -> HTMLResponse:
    # Where both streams stood, in the page's snapshot: an event committed after it is
    # replayed, one before it is on the page.
    await one_snapshot(db)
    since = await event_store.last_seq(db, SPRINTS_STREAM)
    tasks_since = await event_store.last_seq(db, TASK_STREAM)
    view = await _view(db, services, sprint_id)
    if view is None:
        return _not_found(request, viewer, f"sprint {sprint_id}")
    context = {
        "section": "sprints",
        **view,
        "stream": f"/v1/sprints/events?last_event_id={since}",
        "events": events.SPRINTS,
        "task_stream": f"/v1/tasks/events?last_event_id={tasks_since}",
        "task_events": events.TASKS,
    }
    return render(request, "sprint_page.html", viewer, context)


@router.get("/sprints/{sprint_id}/live")
async def sprint_live(
    sprint_id: str, request: Request, viewer: ViewerDep, db: DbDep, services: ServicesDep
) -> Response:
    """The part of the page its events change: all of it but the crumbs."""
    await one_snapshot(db)
    view = await _view(db, services, sprint_id)
    if view is None:
        return Response(status_code=404)
    return render(request, "_sprint_live.html", viewer, view)


async def _view(db: DbDep, services: ServicesDep, sprint_id: str) -> dict[str, object] | None:
    """The sprint, its next status (None once completed), its burn-up and its chart."""
    sprint = await sprint_store.get_sprint(db, sprint_id)
    if sprint is None:
        return None
    backlog = await burn_up_store.backlog_of(db, sprint_id)
    burn_up = burn_up_store.burn_up_of(sprint, backlog, services.sprints.now())
    return {
        "sprint": sprint,
        "next_status": next(iter(sorted(SPRINT_ALLOWED[sprint.status])), None),
        "lifecycle": list(SprintStatus),
        "burn_up": burn_up,
        "chart": burn_up_chart(burn_up),
    }


def _not_found(request: Request, viewer: Viewer, what: str) -> HTMLResponse:
    context = {"section": "sprints", "what": what}
    return render(request, "not_found.html", viewer, context, status_code=404)
