"""`Idempotency-Key` on `POST /v1/agents` and `POST /v1/workflows`, through real HTTP, as on
the other creates: a repeat gets the first response and makes nothing, another body with
the key is a 409, keys are scoped to their endpoint, requests racing with one key make one
resource, and a key is remembered for the configured window, then forgotten."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.support.api import assert_problem
from tests.support.server import make_settings

pytestmark = pytest.mark.own_server  # settings of its own (`settings` below)

RETENTION_S = 3_600  # not the default: the window must come from the settings


@dataclass(frozen=True)
class Resource:
    path: str
    body: dict[str, Any]
    other: dict[str, Any]  # a different request for the same key
    change: dict[str, Any]  # a PATCH after the create


AGENT = {"name": "keyed", "model": {"provider": "scripted", "name": "s", "script": [{"text": "x"}]}}
WORKFLOW = {
    "name": "keyed",
    "nodes": [
        {"id": "s", "type": "start"},
        {"id": "a", "type": "task", "config": {"title": "A", "assigned_to": "ann"}},
        {"id": "e", "type": "end"},
    ],
    "edges": [
        {"id": "e1", "source": "s", "target": "a"},
        {"id": "e2", "source": "a", "target": "e"},
    ],
}
RESOURCES = {
    "agents": Resource("/v1/agents", AGENT, {**AGENT, "name": "other"}, {"role": "critic"}),
    "workflows": Resource(
        "/v1/workflows", WORKFLOW, {**WORKFLOW, "name": "other"}, {"description": "changed"}
    ),
}


@pytest.fixture(params=sorted(RESOURCES))
def resource(request: pytest.FixtureRequest) -> Resource:
    return RESOURCES[request.param]


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url, idempotency={"retention_s": RETENTION_S})


async def listed(client: httpx.AsyncClient, resource: Resource) -> list[str]:
    response = await client.get(resource.path, params={"limit": 200})
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["items"]]


async def post(client: httpx.AsyncClient, resource: Resource, key: str | None, **body: Any) -> Any:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return await client.post(resource.path, json=body or resource.body, headers=headers)


async def test_a_repeat_gets_the_first_response_and_makes_nothing(
    client: httpx.AsyncClient, resource: Resource
) -> None:
    first = await post(client, resource, "k-1")
    assert first.status_code == 201, first.text
    assert "idempotent-replayed" not in first.headers
    again = await post(client, resource, "k-1")
    assert again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["etag"] == first.headers["etag"]
    assert await listed(client, resource) == [first.json()["id"]]

    # The first response, as it was, even once the resource has changed since.
    changed = await client.patch(f"{resource.path}/{first.json()['id']}", json=resource.change)
    assert changed.status_code == 200, changed.text
    later = await post(client, resource, "k-1")
    assert later.json() == first.json() and later.headers["idempotent-replayed"] == "true"

    reused = await post(client, resource, "k-1", **resource.other)
    assert_problem(reused, 409, "idempotency_key_reused")
    too_long = await post(client, resource, "k" * 256)
    assert_problem(too_long, 422, "validation_error")
    unkeyed = [await post(client, resource, None) for _ in range(2)]
    assert len({r.json()["id"] for r in unkeyed}) == 2  # no key, no memory
    assert len(await listed(client, resource)) == 3


async def test_keys_are_scoped_to_their_endpoint(client: httpx.AsyncClient) -> None:
    agent = await post(client, RESOURCES["agents"], "shared")
    workflow = await post(client, RESOURCES["workflows"], "shared")
    task = await client.post(
        "/v1/tasks", json={"title": "t"}, headers={"Idempotency-Key": "shared"}
    )
    assert [r.status_code for r in (agent, workflow, task)] == [201, 201, 201]
    assert not any("idempotent-replayed" in r.headers for r in (agent, workflow, task))


async def test_requests_racing_with_one_key_make_one_resource(
    client: httpx.AsyncClient, resource: Resource
) -> None:
    answers = await asyncio.gather(*(post(client, resource, "race") for _ in range(8)))
    assert [r.status_code for r in answers] == [201] * 8, [r.text for r in answers]
    assert len({r.json()["id"] for r in answers}) == 1
    assert sum("idempotent-replayed" not in r.headers for r in answers) == 1
    assert len(await listed(client, resource)) == 1


AGE_KEYS = text("UPDATE idempotency_keys SET created_at = created_at - make_interval(secs => :s)")


@pytest.fixture
def aged(clean_db: AsyncEngine) -> Callable[[int], Awaitable[None]]:
    """Makes every stored key `seconds` older, as the server's clock would after a wait."""

    async def age(seconds: int) -> None:
        async with clean_db.begin() as conn:
            await conn.execute(AGE_KEYS, {"s": seconds})

    return age


async def test_a_key_is_remembered_for_the_configured_window_then_forgotten(
    client: httpx.AsyncClient, resource: Resource, aged: Callable[[int], Awaitable[None]]
) -> None:
    first = await post(client, resource, "w-1")
    await aged(RETENTION_S - 60)  # within the window (a minute to spare for this test)
    replay = await post(client, resource, "w-1")
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.json()["id"] == first.json()["id"]

    await aged(61)  # past it: the key is forgotten, whatever the body
    fresh = await post(client, resource, "w-1", **resource.other)
    assert fresh.status_code == 201 and "idempotent-replayed" not in fresh.headers
    assert fresh.json()["id"] != first.json()["id"]
    again = await post(client, resource, "w-1", **resource.other)
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["id"] == fresh.json()["id"]
