"""A project's Kanban board page as HTML over HTTP (tests/ui drives it in a browser): its
columns with counts against WIP limits (full, over, strict, advisory), the moves each card
offers, the tasks in no column, the pieces its script fetches, the project picker and the
links to it, and escaping."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from app.tasks.store import boards as board_store
from tests.support.factories import create_task, unique
from tests.tasks.test_boards_api import limit, move


def early(name: str) -> str:
    """A project of the test's own whose name sorts before the shared database's others
    (`project-…`): the pickers list the first projects by name, up to a bound."""
    return unique(f"0-{name}")


def _piece(html: str, name: str) -> str:
    """One column (or the off-board section) of the page, up to its end."""
    found = re.search(rf'<section class="[^"]*" data-piece="{name}".*?</section>', html, re.S)
    assert found, f"no {name} piece"
    return found[0]


def _cards(html: str) -> list[str]:
    return re.findall(r'id="task-(\w+)"', html)


def _moves(html: str, task_id: str) -> list[str]:
    card = re.search(rf'id="task-{task_id}".*?</li>', html, re.S)
    assert card, f"no card {task_id}"
    return re.findall(r'data-column="(\w+)"', card[0])


async def test_the_board_shows_each_column_with_its_count_limit_and_cards(
    client: httpx.AsyncClient,
) -> None:
    atlas, zeus = early("atlas"), early("zeus")
    first = await create_task(client, title="Write docs", project=atlas)
    second = await create_task(client, title="Ship it", project=atlas, assigned_to=unique("ann"))
    third = await create_task(client, title="Test it", project=atlas, assigned_to=unique("bob"))
    elsewhere = await create_task(client, title="Elsewhere", project=zeus)
    await limit(client, atlas, "ready", 2)
    await limit(client, atlas, "in_progress", 5, "advisory")

    page = await client.get(f"/ui/projects/{atlas}/board")
    assert page.status_code == 200
    html = page.text
    assert re.findall(r'data-piece="(\w+)"', html) == [
        "backlog",
        "ready",
        "in_progress",
        "review",
        "done",
        "off_board",
    ]
    backlog = _piece(html, "backlog")
    assert _cards(backlog) == [first["id"]]
    assert '<span class="count">1</span>' in backlog and "WIP limit" in backlog
    ready = _piece(html, "ready")
    assert _cards(ready) == [second["id"], third["id"]]  # oldest first, as the API's board
    assert '<span class="count">2 / 2</span>' in ready
    assert 'class="task-column kanban-column is-full"' in ready
    assert "Strict WIP limit 2: full" in ready and "data-remove" in ready
    in_progress = _piece(html, "in_progress")
    assert '<span class="count">0 / 5</span>' in in_progress
    assert "Advisory WIP limit 5</p>" in in_progress
    assert '<option value="advisory" selected>' in in_progress
    assert elsewhere["id"] not in html
    assert 'data-stream="/v1/tasks/events?last_event_id=' in html
    assert '"created": "backlog"' in html and '"blocked": "off_board"' in html
    assert 'aria-current="page">Boards</a>' in html
    assert f'<option value="{atlas}" selected>{atlas}</option>' in html
    assert f'<option value="{zeus}">{zeus}</option>' in html

    # Each card offers the columns the state machine has a way to; backlog asks who takes it.
    assert _moves(html, first["id"]) == ["ready", "in_progress", "review", "done"]
    assert f'aria-label="Assign {first["id"]} to"' in backlog
    assert _moves(html, second["id"]) == ["in_progress", "review", "done"]
    assert f'aria-label="Assign {second["id"]} to"' not in ready


async def test_an_advisory_column_past_its_limit_is_marked_over(
    client: httpx.AsyncClient,
) -> None:
    atlas, ann = unique("atlas"), unique("ann")
    await limit(client, atlas, "in_progress", 1, "advisory")
    for title in ("A", "B"):
        task = await create_task(client, title=title, project=atlas, assigned_to=ann)
        assert (await move(client, task["id"], "in_progress")).status_code == 200
    column = await client.get(f"/ui/projects/{atlas}/board/in_progress")
    assert column.status_code == 200
    assert column.text.lstrip().startswith('<section class="task-column kanban-column is-over"')
    assert '<span class="count">2 / 1</span>' in column.text
    assert "Advisory WIP limit 1: over it" in column.text


async def test_done_is_final_and_the_tasks_in_no_column_are_listed_apart(
    client: httpx.AsyncClient,
) -> None:
    atlas, ann = unique("atlas"), unique("ann")
    done = await create_task(client, title="Done", project=atlas, assigned_to=ann)
    assert (await move(client, done["id"], "done")).status_code == 200
    blocked = await create_task(client, title="Stuck", project=atlas, assigned_to=ann)
    to_blocked = {"to": "blocked"}
    assert (
        await client.post(f"/v1/tasks/{blocked['id']}/transitions", json=to_blocked)
    ).status_code == 200

    html = (await client.get(f"/ui/projects/{atlas}/board")).text
    assert _cards(_piece(html, "done")) == [done["id"]]
    assert _moves(html, done["id"]) == []  # completed moves no further
    off = _piece(html, "off_board")
    assert _cards(off) == [blocked["id"]]
    assert '<span class="status status-blocked">blocked</span>' in off
    assert _moves(off, blocked["id"]) == ["ready", "in_progress", "review", "done"]

    fragment = await client.get(f"/ui/projects/{atlas}/board/off_board")
    assert fragment.text.lstrip().startswith('<section class="kanban-off" data-piece="off_board"')
    assert _cards(fragment.text) == [blocked["id"]]
    assert (await client.get(f"/ui/projects/{atlas}/board/nowhere")).status_code == 404
    empty = await client.get(f"/ui/projects/{unique('nobody')}/board/off_board")
    assert "None: blocked, failed, interrupted and cancelled tasks" in empty.text


async def test_a_column_beyond_its_shown_cards_links_to_the_rest(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(board_store, "COLUMN_SHOWN", 2)
    atlas = unique("atlas")
    tasks = [await create_task(client, title=f"T{i}", project=atlas) for i in range(3)]
    html = (await client.get(f"/ui/projects/{atlas}/board")).text
    backlog = _piece(html, "backlog")
    assert _cards(backlog) == [t["id"] for t in tasks[:2]]
    assert '<span class="count">3</span>' in backlog
    assert f'href="/ui/tasks?status=created&amp;project={atlas}">1 more' in backlog


@pytest.mark.own_server  # a database whose tasks name no project: only a private one is
async def test_without_projects_the_picker_says_so(client: httpx.AsyncClient) -> None:
    empty = await client.get("/ui/boards")
    assert "No task names a project yet" in empty.text
    assert re.findall(r'<li><a href="/ui/projects/([^"]+)/board">', empty.text) == []


async def test_the_boards_are_picked_by_project_and_linked_from_the_tasks_page(
    client: httpx.AsyncClient,
) -> None:
    atlas, zeus = early("atlas"), early("zeus")
    for project in (zeus, atlas):
        await create_task(client, title="t", project=project)
    picker = await client.get("/ui/boards")
    listed = re.findall(r'<li><a href="/ui/projects/([^"]+)/board">', picker.text)
    assert [p for p in listed if p in (atlas, zeus)] == [atlas, zeus]
    chosen = await client.get("/ui/boards", params={"project": atlas}, follow_redirects=False)
    assert (chosen.status_code, chosen.headers["location"]) == (303, f"/ui/projects/{atlas}/board")
    tasks = await client.get("/ui/tasks", params={"project": zeus})
    assert f'<a href="/ui/projects/{zeus}/board">Board of {zeus}</a>' in tasks.text
    assert "Board of" not in (await client.get("/ui/tasks")).text
    # A project no task names yet has an empty board: its limits can be set before its tasks.
    hermes = unique("hermes")
    fresh = await client.get(f"/ui/projects/{hermes}/board")
    assert fresh.status_code == 200 and _cards(fresh.text) == []
    assert f'<option value="{hermes}" selected>{hermes}</option>' in fresh.text


async def test_titles_and_projects_are_escaped(client: httpx.AsyncClient) -> None:
    odd = unique("<i>p")
    task: dict[str, Any] = await create_task(client, title="<b>bold</b>", project=odd)
    html = (await client.get(f"/ui/projects/{quote(odd)}/board")).text
    assert task["id"] in html
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "<i>p" not in html and "&lt;i&gt;p" in html
