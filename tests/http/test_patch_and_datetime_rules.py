"""PATCH bodies keep one rule: a field left out stays, `null` clears a field that may be
empty, and `null` for a field that may not is a 422 `validation_error` naming it (never a
500), changing nothing. Datetimes a client sends must be storable once moved to UTC."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.api import assert_problem
from tests.support.factories import create_task

AGENT = {"name": "a", "model": {"provider": "scripted", "name": "s", "script": [{"text": "x"}]}}
WORKFLOW = {"name": "Release"}


def _fields(response: httpx.Response) -> list[str]:
    problem = assert_problem(response, 422, "validation_error")
    return [error["field"] for error in problem["errors"]]


async def _created(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post(url, json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


@pytest.mark.parametrize(
    "field", ["name", "role", "skills", "system_prompt", "model", "limits", "cost_tier"]
)
async def test_null_for_an_agent_field_is_a_422_naming_it(
    client: httpx.AsyncClient, field: str
) -> None:
    agent = await _created(client, "/v1/agents", AGENT)
    url = f"/v1/agents/{agent['id']}"
    assert _fields(await client.patch(url, json={field: None})) == [field]
    assert (await client.get(url)).json() == agent


@pytest.mark.parametrize(
    "field",
    ["name", "description", "nodes", "edges", "review_timeout_s", "review_timeout_policy"],
)
async def test_null_for_a_workflow_field_is_a_422_naming_it(
    client: httpx.AsyncClient, field: str
) -> None:
    workflow = await _created(client, "/v1/workflows", WORKFLOW)
    url = f"/v1/workflows/{workflow['id']}"
    assert _fields(await client.patch(url, json={field: None})) == [field]
    assert (await client.get(url)).json() == workflow


async def test_null_clears_a_nullable_task_field_and_is_refused_for_the_others(
    client: httpx.AsyncClient,
) -> None:
    task = await create_task(client, project="p", deadline="2030-01-01T00:00:00Z", budget_limit=3.0)
    url = f"/v1/tasks/{task['id']}"
    for field in ["title", "priority", "reviewers", "max_retries"]:
        assert _fields(await client.patch(url, json={field: None})) == [field]
    cleared = await client.patch(url, json={"project": None, "deadline": None})
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["project"] is None and cleared.json()["deadline"] is None
    assert cleared.json()["budget_limit"] == 3.0  # left out: kept


async def test_the_published_schema_allows_null_only_where_it_clears(
    client: httpx.AsyncClient,
) -> None:
    schemas = (await client.get("/openapi.json")).json()["components"]["schemas"]

    def accepts_null(schema: str, field: str) -> bool:
        prop = schemas[schema]["properties"][field]
        return {"type": "null"} in prop.get("anyOf", [])

    assert not accepts_null("AgentPatch", "name")
    assert not accepts_null("WorkflowPatch", "review_timeout_policy")
    assert not accepts_null("TaskPatch", "title")
    assert accepts_null("TaskPatch", "deadline")


@pytest.mark.parametrize(
    "deadline",
    [
        "0001-01-01T00:00:00-19:37",
        "2030-01-01T00:00:00+16:00",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:00:00-05:00",
    ],
)
async def test_a_deadline_outside_what_can_be_stored_is_a_422(
    client: httpx.AsyncClient, deadline: str
) -> None:
    created = await client.post("/v1/tasks", json={"title": "x", "deadline": deadline})
    assert _fields(created) == ["deadline"]
    task = await create_task(client)
    url = f"/v1/tasks/{task['id']}"
    assert _fields(await client.patch(url, json={"deadline": deadline})) == ["deadline"]
    moved = await client.post(f"{url}/transitions", json={"to": "cancelled", "deadline": deadline})
    assert _fields(moved) == ["deadline"]
    assert (await client.get(url)).json() == task


async def test_deadlines_at_the_edges_of_what_can_be_stored_are_kept(
    client: httpx.AsyncClient,
) -> None:
    for deadline in [
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "0001-01-01T00:00:00-15:59",
        "2030-01-01T00:00:00+15:59",
    ]:
        response = await client.post("/v1/tasks", json={"title": "x", "deadline": deadline})
        assert response.status_code == 201, (deadline, response.text)
