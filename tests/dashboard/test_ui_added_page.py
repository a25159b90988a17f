"""A dashboard page added from outside `app/`: its module declares a router and its link,
the app is built with it, and through a real server the page is served and its link takes
its place in the bar of every page (the recipe in docs/architecture.md, "A dashboard
page")."""

from __future__ import annotations

import re

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.core.config import Settings
from app.dashboard.deps import ViewerDep
from app.dashboard.page import NavItem, Page
from app.dashboard.templating import TEMPLATES, render
from tests.support.server import running_app

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = Page(router, NavItem("notes", "Notes", "/ui/notes", order=35))  # after Lanes

# A page whose files live outside the dashboard's folder compiles its own template.
NOTES = TEMPLATES.env.from_string(
    '{% extends "base.html" %}{% block title %}Notes{% endblock %}'
    "{% block main %}<h1>Notes</h1><p>{{ note }}</p>{% endblock %}"
)


@router.get("/notes")
async def notes_page(request: Request, viewer: ViewerDep) -> HTMLResponse:
    return render(request, NOTES, viewer, {"section": "notes", "note": "<b>bold</b> claim"})


def _bar(html: str) -> list[tuple[str, str, bool]]:
    """The bar's links: (href, label, marked as the current page)."""
    nav = html[html.index('<nav aria-label="Main">') : html.index("</nav>")]
    return [
        (href, label, bool(current))
        for href, current, label in re.findall(
            r'<li><a href="([^"]+)"( aria-current="page")?>([^<]+)</a></li>', nav
        )
    ]


BAR = [
    ("/ui/overview", "Overview"),
    ("/ui/runs", "Runs"),
    ("/ui/lanes", "Lanes"),
    ("/ui/notes", "Notes"),
    ("/ui/approvals", "Approvals"),
    ("/ui/workflows", "Workflows"),
    ("/ui/tasks", "Tasks"),
    ("/ui/boards", "Boards"),
    ("/ui/sprints", "Sprints"),
    ("/ui/workspaces", "Workspaces"),
    ("/ui/agents", "Agents"),
    ("/docs", "API"),
]


async def test_an_added_page_is_served_and_linked_from_the_others(settings: Settings) -> None:
    async with (
        running_app(settings, pages=[PAGE]) as (url, _app),
        httpx.AsyncClient(base_url=url, timeout=30) as client,
    ):
        page = await client.get("/ui/notes")
        runs = await client.get("/ui/runs")

    assert page.status_code == 200
    assert "<h1>Notes</h1><p>&lt;b&gt;bold&lt;/b&gt; claim</p>" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    assert [(h, label) for h, label, _ in _bar(page.text)] == BAR
    assert [h for h, _, current in _bar(page.text) if current] == ["/ui/notes"]

    assert runs.status_code == 200
    assert [(h, label) for h, label, _ in _bar(runs.text)] == BAR
    assert [h for h, _, current in _bar(runs.text) if current] == ["/ui/runs"]
