"""The sprint pages as HTML over HTTP (tests/ui drives one in a browser): a project's
sprints with the velocity chart (bars and the rolling average), a sprint with its
lifecycle's next step, its backlog and its burn-up chart, the live fragment, the project
picker, the board's links to them, 404s and escaping."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from app.sprints.ui import sprints as sprint_pages
from tests.sprints.test_sprints_api import _completed_sprint, add, finish_task, make_sprint, move
from tests.support.factories import create_task, project, unique


def early(name: str) -> str:
    """A project of the test's own whose name sorts before the shared database's others
    (`project-…`): the picker lists the first projects by name, up to a bound."""
    return unique(f"0-{name}")


def _rows(html: str, table: str) -> list[list[str]]:
    """The cells of a table's body rows, as text."""
    body = re.search(rf'<table class="{table}">.*?<tbody>(.*?)</tbody>', html, re.S)
    assert body, f"no table {table}"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body[1], re.S)
    return [
        [
            re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        for row in rows
    ]


async def test_a_projects_sprints_and_its_velocity_chart(client: httpx.AsyncClient) -> None:
    atlas, zeus = project(), project()
    ids = [
        await _completed_sprint(client, f"Sprint {i}", done, 2, atlas)
        for i, done in enumerate([10, 20, 30, 40])
    ]
    planned = await make_sprint(client, project=atlas, name="Sprint 4", goal="next")
    await make_sprint(client, project=zeus, name="Elsewhere")

    page = await client.get(f"/ui/projects/{atlas}/sprints")
    assert page.status_code == 200
    html = page.text
    assert 'aria-current="page">Sprints</a>' in html
    rows = _rows(html, "sprints")
    assert [r[0] for r in rows] == ["Sprint 4", "Sprint 3", "Sprint 2", "Sprint 1", "Sprint 0"]
    assert rows[0][1:] == ["planning", "2026-12-01 to 2026-12-14", "14", "0", "0", "0"]
    assert rows[1][1:] == ["completed", "2026-12-01 to 2026-12-14", "14", "2", "42", "40"]
    assert f'href="/ui/sprints/{planned["id"]}"' in html and "Elsewhere" not in html

    # A pair of bars per completed sprint, oldest first, and the average of the last three.
    chart = re.search(r'<svg class="chart-svg velocity-chart".*?</svg>', html, re.S)
    assert chart
    assert re.findall(r'data-sprint="(\w+)"', chart[0]) == ids
    assert len(re.findall(r'class="bar-committed"', chart[0])) == 4
    assert len(re.findall(r'<circle class="dot-average"', chart[0])) == 4
    assert '<polyline class="line-average"' in chart[0]
    assert "Sprint 3: 40 of 42 points completed; average 30.0" in chart[0]
    numbers = _rows(html, "velocity-numbers")
    assert [(r[0], r[2], r[3], r[4]) for r in numbers] == [
        ("Sprint 0", "12", "10", "10.0"),
        ("Sprint 1", "22", "20", "15.0"),
        ("Sprint 2", "32", "30", "20.0"),
        ("Sprint 3", "42", "40", "30.0"),
    ]
    assert "<strong>30.0</strong> points completed of 32.0 committed" in html

    empty = await client.get(f"/ui/projects/{zeus}/sprints")
    assert "No completed sprint yet" in empty.text and "velocity-chart" not in empty.text
    nobody = await client.get(f"/ui/projects/{project()}/sprints")
    assert nobody.status_code == 200 and "No sprints." in nobody.text


async def test_the_sprint_list_pages_by_links(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sprint_pages, "LIST_PAGE", 2)
    atlas = project()
    made = [await make_sprint(client, project=atlas, name=f"S{i}") for i in range(3)]
    first = (await client.get(f"/ui/projects/{atlas}/sprints")).text
    assert [r[0] for r in _rows(first, "sprints")] == ["S2", "S1"]
    assert f'href="/ui/projects/{atlas}/sprints?before={made[1]["id"]}" rel="next"' in first
    second = await client.get(f"/ui/projects/{atlas}/sprints", params={"before": made[1]["id"]})
    assert [r[0] for r in _rows(second.text, "sprints")] == ["S0"]
    assert "Older sprints" not in second.text and "Newest sprints" in second.text


async def test_a_sprint_page_shows_its_lifecycle_backlog_and_burn_up(
    client: httpx.AsyncClient,
) -> None:
    today = datetime.now(UTC).date()
    atlas, ann = project(), unique("ann")
    sprint = await make_sprint(
        client,
        project=atlas,
        name="Sprint 9",
        goal="Ship the export",
        start_date=str(today - timedelta(days=1)),
        end_date=str(today + timedelta(days=5)),
    )
    tasks = [
        await create_task(client, title=title, project=atlas, assigned_to=ann)
        for title in ("Write it", "Test it")
    ]
    assert (
        await add(client, sprint["id"], {tasks[0]["id"]: 3, tasks[1]["id"]: 5})
    ).status_code == 200
    await move(client, sprint["id"], "active")
    await finish_task(client, tasks[0]["id"])

    page = await client.get(f"/ui/sprints/{sprint['id']}")
    assert page.status_code == 200
    html = page.text
    assert '<h1>Sprint 9 <span class="status status-active">active</span></h1>' in html
    assert "Ship the export" in html
    assert f"{today - timedelta(days=1)} to {today + timedelta(days=5)} (7 days)" in html
    assert (
        '<dd class="committed">8 points</dd>' in html
        and '<dd class="completed">3 points</dd>' in html
    )
    assert re.findall(r'<li class="(\w*)"( aria-current="step")?>', html) == [
        ("done", ""),
        ("", ' aria-current="step"'),
        ("", ""),
        ("", ""),
        ("", ""),
    ]
    assert f'<div class="sprint-next" data-version="{sprint["version"] + 2}">' in html
    assert '<button type="button" data-to="in_review">Move to in review</button>' in html
    assert _rows(html, "sprint-backlog") == [
        ["Write it", "completed", "3"],
        ["Test it", "assigned", "5"],
    ]
    assert f'data-tasks="{tasks[0]["id"]} {tasks[1]["id"]}"' in html

    # The burn-up: yesterday (nothing committed by its end: the tasks joined today), today.
    chart = re.search(r'<svg class="chart-svg burn-up-chart".*?</svg>', html, re.S)
    assert chart
    assert re.findall(r'<g class="chart-day" data-date="([\d-]+)">', chart[0]) == [
        str(today - timedelta(days=1)),
        str(today),
    ]
    assert f"{today}: 3 of 8 points completed" in chart[0]
    assert '<polyline class="line-scope" points="' in chart[0]
    assert _rows(html, "burn-up-numbers") == [
        [str(today - timedelta(days=1)), "0", "0"],
        [str(today), "8", "3"],
    ]
    assert 'data-stream="/v1/sprints/events?last_event_id=' in html
    assert 'data-task-stream="/v1/tasks/events?last_event_id=' in html
    assert '"sprint.transitioned"' in html and '"task.transitioned"' in html

    live = await client.get(f"/ui/sprints/{sprint['id']}/live")
    assert live.status_code == 200 and live.text.lstrip().startswith("<h1>Sprint 9")
    assert "<html" not in live.text

    await move(client, sprint["id"], "in_review", "retrospective", "completed")
    done = (await client.get(f"/ui/sprints/{sprint['id']}")).text
    assert "data-to=" not in done and "a sprint moves no further" in done
    assert "these points are its velocity record" in done


async def test_a_sprint_not_started_has_an_empty_chart_and_no_tasks(
    client: httpx.AsyncClient,
) -> None:
    sprint = await make_sprint(client, project=project())  # December 2026: after today
    html = (await client.get(f"/ui/sprints/{sprint['id']}")).text
    assert "It starts on 2026-12-01" in html and 'class="chart-day"' not in html
    assert "No tasks yet" in html
    assert '<button type="button" data-to="active">Move to active</button>' in html


async def test_unknown_sprints_are_404(client: httpx.AsyncClient) -> None:
    page = await client.get("/ui/sprints/sprint_nope")
    assert page.status_code == 404 and "There is no sprint sprint_nope" in page.text
    assert (await client.get("/ui/sprints/sprint_nope/live")).status_code == 404


@pytest.mark.own_server  # a database with no sprint: only a private one is
async def test_without_sprints_the_picker_says_so(client: httpx.AsyncClient) -> None:
    empty = await client.get("/ui/sprints")
    assert "No project has a sprint yet" in empty.text
    assert re.findall(r'<li><a href="/ui/projects/([^"]+)/sprints">', empty.text) == []


async def test_the_picker_and_the_board_lead_to_the_sprints(client: httpx.AsyncClient) -> None:
    atlas, zeus = early("atlas"), early("zeus")
    active = await make_sprint(client, project=atlas, name="Now")
    await move(client, active["id"], "active")
    await make_sprint(client, project=zeus, name="Later")
    picker = (await client.get("/ui/sprints")).text
    listed = re.findall(r'<li><a href="/ui/projects/([^"]+)/sprints">', picker)
    assert [p for p in listed if p in (atlas, zeus)] == [atlas, zeus]
    assert f'<a href="/ui/sprints/{active["id"]}">its active sprint</a>' in picker
    chosen = await client.get("/ui/sprints", params={"project": "a b"}, follow_redirects=False)
    assert (chosen.status_code, chosen.headers["location"]) == (303, "/ui/projects/a%20b/sprints")

    board = (await client.get(f"/ui/projects/{atlas}/board")).text
    assert f'<a href="/ui/projects/{atlas}/sprints">Sprints of {atlas}</a>' in board
    assert f'href="/ui/sprints/{active["id"]}">Now</a> (0 of 0 points)' in board
    assert "no active sprint" in (await client.get(f"/ui/projects/{zeus}/board")).text


async def test_names_and_goals_are_escaped(client: httpx.AsyncClient) -> None:
    odd = unique("<i>p")
    sprint: dict[str, Any] = await make_sprint(
        client, project=odd, name="<b>bold</b>", goal="<script>x</script>"
    )
    html = (await client.get(f"/ui/sprints/{sprint['id']}")).text
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "<script>x</script>" not in html
    listed = (await client.get(f"/ui/projects/{quote(odd, safe='')}/sprints")).text
    assert "&lt;b&gt;bold&lt;/b&gt;" in listed and "<i>p" not in listed
