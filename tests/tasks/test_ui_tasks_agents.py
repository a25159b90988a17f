"""The dashboard's tasks and agents pages as HTML over HTTP (tests/ui drives them live in
a browser): the board's columns, their bounds and the paged list behind each, filters,
a task's detail (moves, audit trail, runs, parent and children), the fragments' answers
when there is nothing to show, escaping, and the agents' list and forms."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest

from app.agents import ui as agents_page
from app.core.states import TaskStatus
from app.tasks.ui import tasks as tasks_page
from tests.support import factories
from tests.support.factories import create_task, project, settle, start_run, unique

QUICK: dict[str, Any] = {
    "name": "quick",
    "tools": ["echo"],
    "model": {"provider": "scripted", "name": "s", "script": [{"text": "ok"}]},
}


async def make_agent(client: httpx.AsyncClient, body: dict[str, Any]) -> str:
    """The agent `body` makes, under a name of the test's own unless it gives one: its id."""
    made = await factories.make_agent(client, **{**body, "name": body.get("name") or unique("a")})
    return str(made["id"])


def quick(name: str | None = None, **fields: Any) -> dict[str, Any]:
    """QUICK under a name of the test's own."""
    return {**QUICK, "name": name or unique("quick"), **fields}


def _ids(html: str, prefix: str) -> list[str]:
    return re.findall(rf'id="{prefix}-([\w]+)"', html)


def _columns(html: str) -> list[str]:
    return re.findall(r'class="task-column[^"]*" data-status="(\w+)"', html)


def _column(html: str, status: str) -> str:
    """One column of the board, up to the next."""
    found = re.search(
        rf'<section class="task-column[^"]*" data-status="{status}".*?</section>', html, re.S
    )
    assert found, f"no {status} column"
    return found[0]


make_task = create_task


async def move(client: httpx.AsyncClient, task_id: str, to: str, **body: Any) -> None:
    response = await client.post(f"/v1/tasks/{task_id}/transitions", json={"to": to, **body})
    assert response.status_code == 200, response.text


async def test_the_board_has_a_column_per_status_each_bounded_with_a_paged_list_behind(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks_page, "COLUMN_CARDS", 2)
    monkeypatch.setattr(tasks_page, "STATUS_PAGE", 2)
    apollo, sarah = project(), unique("sarah")  # the board of the test's own project
    created = [(await make_task(client, title=f"t{i}", project=apollo))["id"] for i in range(3)]
    assigned = (await make_task(client, assigned_to=sarah, project=apollo))["id"]

    board = await client.get("/ui/tasks", params={"project": apollo})
    assert board.status_code == 200
    columns = _columns(board.text)
    assert columns == [status.value for status in TaskStatus]  # the state machine's order
    newest = _column(board.text, "created")
    assert _ids(newest, "task") == [created[2], created[1]]
    assert '<span class="count">2+</span>' in newest
    assert f'href="/ui/tasks?status=created&amp;project={apollo}">More</a>' in newest
    assert _ids(_column(board.text, "assigned"), "task") == [assigned]
    assert sarah in board.text and apollo in board.text
    assert 'class="task-column is-empty" data-status="completed"' in board.text
    assert 'data-stream="/v1/tasks/events?last_event_id=' in board.text

    mine = {"status": "created", "project": apollo}
    listed = await client.get("/ui/tasks", params=mine)
    assert _ids(listed.text, "task") == [created[2], created[1]]
    older = re.search(r'href="/ui/tasks\?([^"]+)" rel="next"', listed.text)
    assert older and older[1] == f"status=created&amp;project={apollo}&amp;before={created[1]}"
    rest = await client.get("/ui/tasks", params={**mine, "before": created[1]})
    assert _ids(rest.text, "task") == [created[0]]
    assert 'rel="next"' not in rest.text and "Newest tasks" in rest.text
    assert 'data-live-inserts="false"' in rest.text
    unknown = await client.get("/ui/tasks", params={"status": "nonsense", "project": apollo})
    assert _columns(unknown.text) == columns  # an unknown status: the board


async def test_the_board_filters_on_project_and_agent_by_id_or_name(
    client: httpx.AsyncClient,
) -> None:
    name, apollo = unique("quick"), project()
    agent_id = await make_agent(client, quick(name))
    by_id = (await make_task(client, title="by id", assigned_to=agent_id, project=apollo))["id"]
    by_name = (await make_task(client, title="by name", assigned_to=name))["id"]
    other = (await make_task(client, title="person", assigned_to=unique("sarah"), project=apollo))[
        "id"
    ]

    mine = await client.get("/ui/tasks", params={"agent": agent_id})
    assert sorted(_ids(mine.text, "task")) == sorted([by_id, by_name])
    assert f'<a href="/ui/agents/{agent_id}" class="assignee">{name}</a>' in mine.text
    projects = await client.get("/ui/tasks", params={"project": apollo, "agent": ""})
    assert sorted(_ids(projects.text, "task")) == sorted([by_id, other])
    assert f'<option value="{apollo}" selected>{apollo}</option>' in projects.text
    both = await client.get("/ui/tasks", params={"project": apollo, "agent": agent_id})
    assert _ids(both.text, "task") == [by_id]
    gone = await client.get("/ui/tasks", params={"agent": "agent_gone"})
    assert _ids(gone.text, "task") == []

    # A card is rendered only when it fits the filters, as the board's script asks.
    card = await client.get(f"/ui/tasks/{other}/card", params={"project": apollo})
    assert card.status_code == 200 and card.text.lstrip().startswith("<li")
    assert f'data-status="{TaskStatus.ASSIGNED}"' in card.text
    for params in ({"agent": agent_id}, {"status": "created"}, {"project": project()}):
        assert (await client.get(f"/ui/tasks/{other}/card", params=params)).status_code == 204
    assert (await client.get("/ui/tasks/task_none/card")).status_code == 204


async def test_a_task_page_shows_its_moves_trail_runs_and_family(
    client: httpx.AsyncClient,
) -> None:
    name = unique("quick")
    agent_id = await make_agent(client, quick(name))
    parent = await make_task(client, title="parent", description="Why:\nbecause")
    task = await make_task(
        client,
        title="worked",
        assigned_to=agent_id,
        parent_task_id=parent["id"],
        dependencies=[parent["id"]],
        acceptance_criteria=["it works"],
    )
    child = await make_task(client, title="child", parent_task_id=task["id"])
    await move(client, parent["id"], "assigned", assigned_to=unique("sarah"), reason="she knows")

    page = await client.get(f"/ui/tasks/{parent['id']}")
    assert page.status_code == 200
    moves = re.findall(r'data-to="(\w+)"', page.text)
    assert moves == ["in_progress", "blocked", "failed", "cancelled", "interrupted"]
    assert 'id="move-assignee"' not in page.text  # no move to `assigned` from here
    trail = _ids(page.text, "step")
    assert len(trail) == 2 and "she knows" in page.text
    assert "Why:\nbecause" in page.text
    assert f'<a href="/ui/tasks/{task["id"]}">worked</a>' in page.text  # its child
    assert 'data-stream="/v1/tasks/events?last_event_id=' in page.text
    assert "No runs: a task runs once it is assigned to an agent." in page.text

    # The dependency done, the assigned task gets a run on its lane.
    await move(client, parent["id"], "in_progress")
    await move(client, parent["id"], "in_review")
    await move(client, parent["id"], "completed")
    done = await client.get(f"/ui/tasks/{parent['id']}/detail")
    assert "is final: it moves no further" in done.text and "data-to=" not in done.text
    run_id = await _first_run(client, task["id"])
    await settle(client, run_id)
    detail = await client.get(f"/ui/tasks/{task['id']}/detail")
    assert detail.text.lstrip().startswith('<div id="task-detail"')
    assert f'href="/ui/runs/{run_id}"' in detail.text
    assert f'<a href="/ui/agents/{agent_id}">{name}</a>' in detail.text
    assert f'<a href="/ui/tasks/{parent["id"]}">parent</a>' in detail.text
    assert f'<a href="/ui/tasks/{child["id"]}">child</a>' in detail.text
    assert "it works" in detail.text


async def _first_run(client: httpx.AsyncClient, task_id: str) -> str:
    for _ in range(100):
        runs = (await client.get("/v1/runs", params={"lane": f"task:{task_id}"})).json()["items"]
        if runs:
            return str(runs[0]["id"])
        await asyncio.sleep(0.1)
    raise AssertionError("the task got no run")


async def test_a_failed_task_with_no_retries_left_moves_no_further(
    client: httpx.AsyncClient,
) -> None:
    task = await make_task(client, assigned_to=unique("sarah"), max_retries=0)
    await move(client, task["id"], "failed")
    detail = await client.get(f"/ui/tasks/{task['id']}/detail")
    assert "its retries spent (0 of 0)" in detail.text and "data-to=" not in detail.text


async def test_missing_tasks_and_agents_are_404_pages_and_empty_fragments(
    client: httpx.AsyncClient,
) -> None:
    missing = await client.get("/ui/tasks/task_none")
    assert missing.status_code == 404 and "There is no task task_none" in missing.text
    assert '<a href="/ui/tasks">Back to tasks</a>' in missing.text
    assert (await client.get("/ui/tasks/task_none/detail")).status_code == 204
    task = await make_task(client)
    deleted = await client.delete(f"/v1/tasks/{task['id']}")
    assert deleted.status_code == 204
    assert (await client.get(f"/ui/tasks/{task['id']}/detail")).status_code == 204
    assert (await client.get(f"/ui/tasks/{task['id']}/card")).status_code == 204
    agent = await client.get("/ui/agents/agent_none")
    assert agent.status_code == 404 and "There is no agent agent_none" in agent.text
    assert '<a href="/ui/agents">Back to agents</a>' in agent.text


async def test_titles_and_names_are_escaped(client: httpx.AsyncClient) -> None:
    odd = unique("<i>p</i>")
    task = await make_task(client, title="<b>bold</b> move", project=odd)
    before = await make_agent(client, quick())  # the agents' list, from the test's own
    await make_agent(client, quick(unique("<b>agent</b>")))
    board = ("/ui/tasks", {"project": odd})
    for path, params in (
        board,
        (f"/ui/tasks/{task['id']}", {}),
        (f"/ui/tasks/{task['id']}/card", {}),
    ):
        page = await client.get(path, params=params)
        assert "<b>bold</b>" not in page.text and "&lt;b&gt;bold&lt;/b&gt; move" in page.text, path
    agents = await client.get("/ui/agents", params={"after": before})
    assert "<b>agent</b>" not in agents.text and "&lt;b&gt;agent&lt;/b&gt;" in agents.text


async def test_the_agents_list_pages(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agents_page, "AGENTS_PAGE", 2)
    # The list runs in the order agents were made: it is read from the test's own first one.
    start = await make_agent(client, quick())
    ids = [await make_agent(client, quick(unique(f"a{i}"))) for i in range(3)]
    first = await client.get("/ui/agents", params={"after": start})
    assert _ids(first.text, "agent") == ids[:2]
    assert (
        "scripted · <code>s</code>" in first.text and '<span class="pill">echo</span>' in first.text
    )
    more = re.search(r'href="/ui/agents\?after=(\w+)" rel="next"', first.text)
    assert more and more[1] == ids[1]
    rest = await client.get("/ui/agents", params={"after": ids[1]})
    assert _ids(rest.text, "agent") == ids[2:] and "First page" in rest.text
    empty = await client.get("/ui/agents", params={"after": ids[2]})
    assert "No agents yet." in empty.text


async def test_the_agent_forms_are_filled_from_the_schema_or_the_agent(
    client: httpx.AsyncClient,
) -> None:
    new = await client.get("/ui/agents/new")
    assert new.status_code == 200
    assert 'data-endpoint="/v1/agents" data-method="POST"' in new.text
    assert 'name="limits.max_iterations" type="number" step="1" value="25"' in new.text
    assert '<option value="anthropic" selected>' in new.text
    assert 'data-provider="scripted" hidden disabled' in new.text
    assert 'name="tools" value="echo"' in new.text

    script = [{"text": "ok"}, {"tool_calls": [{"name": "echo", "input": {"x": 1}}]}]
    agent_id = await make_agent(client, quick(model={**QUICK["model"], "script": script}))
    run = await start_run(client, agent_id)
    await settle(client, run["id"])
    page = await client.get(f"/ui/agents/{agent_id}")
    assert 'data-method="PATCH"' in page.text and 'data-version="1"' in page.text
    assert f'data-endpoint="/v1/agents/{agent_id}"' in page.text
    assert 'data-provider="anthropic" hidden disabled' in page.text
    assert "&#34;tool_calls&#34;" in page.text and "latency_ms" not in page.text
    assert 'name="tools" value="echo" aria-label="echo may be called" checked' in page.text
    assert f'id="run-{run["id"]}"' in page.text
    assert f'href="/ui/runs?agent={agent_id}"' in page.text


async def test_an_agent_page_tells_why_its_runs_would_fail(client: httpx.AsyncClient) -> None:
    agent_id = await make_agent(
        client, {"name": unique("claude"), "model": {"provider": "anthropic", "name": "claude-x"}}
    )
    page = await client.get(f"/ui/agents/{agent_id}")
    assert 'class="agent-warnings"' in page.text
    assert "No runs yet." in page.text


async def test_an_openai_compatible_agents_form_shows_its_server_key_variable_and_fallback(
    client: httpx.AsyncClient,
) -> None:
    model = {
        "provider": "openai",
        "name": "llama3.1:8b",
        "base_url": "http://localhost:11434/v1",
        "api_key_env": "OLLAMA_API_KEY",
        "fallback": {"provider": "anthropic", "name": "claude-haiku-4-5"},
    }
    agent_id = await make_agent(client, {"name": unique("local"), "model": model})
    page = (await client.get(f"/ui/agents/{agent_id}")).text
    assert '<option value="openai" selected>openai</option>' in page
    assert 'data-provider="openai" hidden' not in page
    assert 'data-provider="anthropic" hidden disabled' in page
    assert 'name="model.base_url" value="http://localhost:11434/v1"' in page
    assert 'name="model.api_key_env" value="OLLAMA_API_KEY"' in page
    assert 'name="model.fallback.name" value="claude-haiku-4-5"' in page
    fallback_provider = page[page.index('id="m-fallback-provider"') :]
    assert fallback_provider.index('value="anthropic" selected') < fallback_provider.index(
        "</select>"
    )


async def test_an_older_agents_fallback_name_is_shown_as_its_providers_fallback(
    client: httpx.AsyncClient,
) -> None:
    model = {"provider": "anthropic", "name": "claude-sonnet-4-5", "fallback_name": "claude-x"}
    agent_id = await make_agent(client, {"name": unique("older"), "model": model})
    page = (await client.get(f"/ui/agents/{agent_id}")).text
    assert 'name="model.fallback.name" value="claude-x"' in page
    fallback_provider = page[page.index('id="m-fallback-provider"') :]
    assert fallback_provider.index('value="anthropic" selected') < fallback_provider.index(
        "</select>"
    )
