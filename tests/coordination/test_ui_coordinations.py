"""A coordination's dashboard page as HTML over HTTP (tests/ui/test_coordination_page.py
watches it live in a browser): the parent, the phases' results, the subtasks by wave with
their tasks' statuses and agents, the coordinator's runs and its end; its live fragment,
the streams it follows, the task page's list of coordinations, missing ids, escaping."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from app.events import ui as events
from tests.coordination.test_coordination_api import (
    Crew,
    coordinate,
    quarterly_report,
    settled,
    subtask,
)
from tests.support.factories import create_task, unique


def _attribute(html: str, name: str) -> str:
    found = re.search(rf"{name}='([^']*)'", html) or re.search(rf'{name}="([^"]*)"', html)
    assert found, f"no {name} on the page"
    return found[1]


def _wave(html: str, number: int) -> str:
    """One wave's heading and table."""
    found = re.search(rf'<h3 id="wave-{number}">.*?</table>', html, re.S)
    assert found, f"no wave {number}"
    return found[0]


async def _centralized(client: httpx.AsyncClient) -> tuple[dict[str, Any], dict[str, Any]]:
    """A parent and its coordination, settled (see `quarterly_report`)."""
    parent, made = await quarterly_report(client)
    return parent, await settled(client, made["id"])


async def test_a_settled_coordination_shows_its_phases_waves_runs_and_outcome(
    client: httpx.AsyncClient,
) -> None:
    parent, done = await _centralized(client)
    page = await client.get(f"/ui/coordinations/{done['id']}")
    assert page.status_code == 200
    html = page.text
    assert f'<a href="/ui/tasks/{parent["id"]}">Quarterly report</a>' in html
    assert (
        f'<h1>Coordination <code>{done["id"]}</code> <span class="status status-completed">' in html
    )
    assert "<dt>Topology</dt><dd>centralized</dd>" in html
    assert re.findall(r'<li data-phase="(\w+)">', html) == [
        "decompose",
        "route",
        "topology",
        "validate",
        "dispatch",
        "roll_up",
        "update_parent",
    ]
    route = re.search(r'<li data-phase="route">.*?</li>', html, re.S)
    assert route and "status-ok" in route[0] and " ms</span>" in route[0]
    assert '"decompose"><strong>decompose</strong> <span class="status status-skipped"' in html

    first, second = _wave(html, 0), _wave(html, 1)
    assert "(centralized)" in first
    assert re.findall(r'id="subtask-(\d+)"', first) == ["0", "1"]
    assert re.findall(r'id="subtask-(\d+)"', second) == ["2"]
    assert "Revenue" in first and "Costs" in first and "Summary" in second
    for state in done["subtasks"]:
        row = re.search(rf'<tr id="subtask-{state["index"]}".*?</tr>', html, re.S)
        assert row, state
        assert f'<a href="/ui/tasks/{state["task_id"]}">' in row[0]
        assert f'<a href="/ui/agents/{state["agent_id"]}">' in row[0]
        assert "status-completed" in row[0]  # the child task's status now

    [synthesis] = done["runs"]
    assert f'<a href="/ui/runs/{synthesis["run_id"]}">' in html and "synthesis" in html
    assert '<dt>Outcome</dt><dd><span class="status status-completed">' in html
    assert done["reason"] and done["reason"] in html

    # Both streams from where they stood, with every event type their schemas publish.
    stream = _attribute(html, "data-stream")
    assert re.fullmatch(rf"/v1/coordinations/{done['id']}/events\?last_event_id=\d+", stream)
    assert int(stream.rsplit("=", 1)[1]) >= 12  # started, 7 phases, 3 subtasks, a run: seen
    assert json.loads(_attribute(html, "data-events")) == events.COORDINATION
    assert set(events.COORDINATION) == {
        "coordination.started",
        "coordination.phase.completed",
        "coordination.subtask.started",
        "coordination.run.created",
        "coordination.completed",
        "coordination.failed",
        "coordination.cancelled",
    }
    assert _attribute(html, "data-task-stream").startswith("/v1/tasks/events?last_event_id=")
    assert json.loads(_attribute(html, "data-task-events")) == events.TASKS

    live = await client.get(f"/ui/coordinations/{done['id']}/live")
    assert live.status_code == 200 and live.text.lstrip().startswith("<h1>Coordination")
    assert "<html" not in live.text and 'id="wave-1"' in live.text


async def test_the_task_page_lists_its_coordinations_and_a_subtask_links_its_parent(
    client: httpx.AsyncClient,
) -> None:
    parent, done = await _centralized(client)
    detail = await client.get(f"/ui/tasks/{parent['id']}")
    assert f'<a href="/ui/coordinations/{done["id"]}"><code>{done["id"]}</code></a>' in detail.text
    assert "3 subtasks · centralized" in detail.text
    child = await client.get(f"/ui/tasks/{done['subtasks'][0]['task_id']}")
    assert f'<a href="/ui/tasks/{parent["id"]}">Quarterly report</a>' in child.text
    assert "Coordinations" not in child.text  # none of its own: no empty section


async def test_a_refused_coordination_shows_why_and_its_unroutable_subtask(
    client: httpx.AsyncClient,
) -> None:
    parent = await create_task(client, title="Alone")
    role = unique("astronaut")  # no agent's
    made = await coordinate(
        client,
        parent["id"],
        decomposition={"subtasks": [subtask("Nobody can", role=f"<b>{role}</b>")]},
    )
    done = await settled(client, made["id"])
    assert done["status"] == "failed"
    page = await client.get(f"/ui/coordinations/{done['id']}")
    assert page.status_code == 200
    assert 'class="error-box coordination-reason"' in page.text
    assert "status-failed" in page.text and "<b>astronaut" not in page.text
    row = re.search(r'<tr id="subtask-0".*?</tr>', page.text, re.S)
    assert row and f"no agent is of role &#39;&lt;b&gt;{role}&lt;/b&gt;&#39;" in row[0]
    assert re.findall(r'<li data-phase="(\w+)">', page.text)[-1] == "validate"


async def test_missing_coordinations_are_a_404_page_and_an_empty_fragment(
    client: httpx.AsyncClient,
) -> None:
    missing = await client.get("/ui/coordinations/coord_none")
    assert missing.status_code == 404 and "There is no coordination coord_none" in missing.text
    assert (await client.get("/ui/coordinations/coord_none/live")).status_code == 404


async def test_titles_are_escaped(client: httpx.AsyncClient) -> None:
    crew = Crew(client)
    await crew.agent("ann")
    parent = await create_task(client, title="<i>parent</i>")
    made = await coordinate(
        client,
        parent["id"],
        decomposition={"subtasks": [crew.subtask("<script>alert(1)</script>")]},
        options={"auto_accept": True},
    )
    done = await settled(client, made["id"])
    page = await client.get(f"/ui/coordinations/{done['id']}")
    assert "<script>alert" not in page.text and "&lt;script&gt;alert(1)" in page.text
    assert "<i>parent" not in page.text and "&lt;i&gt;parent&lt;/i&gt;" in page.text
