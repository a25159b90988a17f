"""`GET /v1/tools`, and agents that name only the tools that exist and say when their
model provider cannot be called."""

from __future__ import annotations

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.api import assert_problem
from tests.support.factories import unique

SCRIPTED = {"provider": "scripted", "name": "s", "script": [{"text": "hi"}]}


async def test_tools_are_listed_with_their_input_schema_idempotency_and_approval(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/v1/tools")
    assert response.status_code == 200
    tools = {tool["name"]: tool for tool in response.json()}
    assert list(tools) == sorted(tools)
    ask = tools["ask_human"]
    assert ask["input_schema"]["required"] == ["question"]
    assert (ask["idempotency"], ask["approval"]) == ("always", "never")
    http = tools["http_request"]
    assert (http["idempotency"], http["approval"]) == ("by_input", "side_effects")
    assert "create_task" in tools and "echo" in tools


async def test_an_agent_naming_an_unknown_tool_is_refused_listing_the_known_ones(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    name = unique("a")
    body = {"name": name, "model": SCRIPTED, "tools": ["echo", "nope"], "auto_approve": ["nah"]}
    problem = assert_problem(await client.post("/v1/agents", json=body), 422, "validation_error")
    fields = {error["field"]: error["message"] for error in problem["errors"]}
    assert set(fields) == {"body.tools[1]", "body.auto_approve[0]"}
    assert fields["body.tools[1]"].startswith("no tool is named 'nope'; known: ")
    assert "ask_human" in fields["body.tools[1]"]
    async with db_engine.connect() as conn:  # nothing was stored under its name
        stored = await conn.scalar(
            text("SELECT count(*) FROM agents WHERE name = :name"), {"name": name}
        )
    assert stored == 0

    created = await client.post("/v1/agents", json={"name": name, "model": SCRIPTED})
    agent = created.json()
    patch = await client.patch(f"/v1/agents/{agent['id']}", json={"tools": ["gone"]})
    assert_problem(patch, 422, "validation_error")
    assert (await client.get(f"/v1/agents/{agent['id']}")).json()["version"] == 1


async def test_an_agent_whose_provider_has_no_credentials_carries_a_warning(
    client: httpx.AsyncClient,
) -> None:
    body = {"name": unique("c"), "model": {"provider": "anthropic", "name": "claude-x"}}
    created = await client.post("/v1/agents", json=body)
    assert created.status_code == 201
    (warning,) = created.json()["warnings"]
    assert "LOOPWRIGHT_LLM__ANTHROPIC__API_KEY" in warning
    agent_id = created.json()["id"]
    assert (await client.get(f"/v1/agents/{agent_id}")).json()["warnings"] == [warning]
    scripted = await client.patch(f"/v1/agents/{agent_id}", json={"model": SCRIPTED})
    assert scripted.json()["warnings"] == []
