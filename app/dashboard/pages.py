"""Every page of the dashboard mounted under `/ui`: rendered on the server (Jinja2,
autoescaped), kept live by small scripts that follow the API's event streams and call its
routes."""

from __future__ import annotations

from collections.abc import Sequence
from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from app.agents import ui as agents
from app.approvals import ui as approvals
from app.coordination import ui as coordinations
from app.dashboard import auth, overview
from app.dashboard.deps import LoginRequired, login_url
from app.dashboard.page import NavItem, Page, navigation
from app.dashboard.templating import STATIC_URL
from app.runs.ui import lanes, runs
from app.sprints.ui import sprints
from app.tasks.ui import kanban, tasks
from app.workflows.ui import workflows
from app.workspaces.ui import workspaces

# The overview is the dashboard's own page, not a domain's.
OVERVIEW = Page(overview.router, NavItem("overview", "Overview", "/ui/overview", order=10))

# Every page, one line each: a new page adds its line here. Routes are matched in this
# order; the bar's links go by each page's `order`.
PAGES: tuple[Page, ...] = (
    auth.PAGE,
    runs.PAGE,
    approvals.PAGE,
    tasks.PAGE,
    kanban.PAGE,
    sprints.PAGE,
    agents.PAGE,
    lanes.PAGE,
    OVERVIEW,
    workflows.PAGE,
    coordinations.PAGE,
    workspaces.PAGE,
)


async def _login_first(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, LoginRequired)
    if exc.fragment:  # the page's script goes to the login form itself
        return Response("log in first", status_code=401, media_type="text/plain")
    return RedirectResponse(login_url(exc.next_path), status_code=303)


def install(app: FastAPI, pages: Sequence[Page] = PAGES) -> None:
    """The dashboard's `pages` under `/ui` with their links in the bar, its static files
    under `/ui/static`, and `/` leading to it."""
    app.mount(
        STATIC_URL, StaticFiles(directory=str(files("app.dashboard") / "static")), name="ui-static"
    )
    app.add_exception_handler(LoginRequired, _login_first)
    for page in pages:
        app.include_router(page.router)
    app.state.dashboard_nav = navigation(tuple(pages))  # read by `templating.render`
    app.add_api_route("/", _to_the_dashboard, include_in_schema=False)


async def _to_the_dashboard() -> RedirectResponse:
    return RedirectResponse("/ui", status_code=307)
