"""Factories for what API tests make through HTTP: agents (scripted by default), runs,
tasks, projects, workflows.

The API tests share one server per worker and its database (tests/conftest.py), so each
test works on what it makes: a name, a project or a title that another test could also
use gets a unique suffix here (`unique`), and a test reads back its own things (by id, or
by a filter on its project or agent), never a whole list."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import httpx


def unique(prefix: str) -> str:
    """`prefix` with a random suffix: a name no other test uses."""
    return f"{prefix}-{secrets.token_hex(3)}"


def scripted(*turns: dict[str, Any]) -> dict[str, Any]:
    """The model of a scripted agent: it answers with `turns`, one per model call."""
    return {"provider": "scripted", "name": "scripted", "script": list(turns)}


def agent_body(*turns: dict[str, Any], name: str | None = None, **fields: Any) -> dict[str, Any]:
    """A scripted agent's create body (`done` as its only turn when none is given)."""
    return {
        "name": name or unique("agent"),
        "model": scripted(*(turns or ({"text": "done"},))),
        **fields,
    }


async def make_agent(
    client: httpx.AsyncClient, *turns: dict[str, Any], name: str | None = None, **fields: Any
) -> dict[str, Any]:
    """A scripted agent, created; its representation."""
    response = await client.post("/v1/agents", json=agent_body(*turns, name=name, **fields))
    assert response.status_code == 201, response.text
    agent: dict[str, Any] = response.json()
    return agent


def scripted_agent(
    http: httpx.Client, name: str, script: Sequence[Any], **fields: Any
) -> dict[str, Any]:
    """`make_agent` for sync tests (those that drive real processes)."""
    response = http.post("/v1/agents", json=agent_body(*script, name=name, **fields))
    assert response.status_code == 201, response.text
    agent: dict[str, Any] = response.json()
    return agent


async def start_run(client: httpx.AsyncClient, agent_id: str, **body: Any) -> dict[str, Any]:
    """A run of the agent, accepted (input `go` unless given)."""
    response = await client.post("/v1/runs", json={"input": "go", **body, "agent_id": agent_id})
    assert response.status_code == 202, response.text
    run: dict[str, Any] = response.json()
    return run


async def settle(client: httpx.AsyncClient, run_id: str, timeout_s: float = 20) -> dict[str, Any]:
    """The run once it settles or waits on a person (`/wait`)."""
    response = await client.get(f"/v1/runs/{run_id}/wait", params={"timeout_s": timeout_s})
    assert response.status_code == 200, response.text
    run: dict[str, Any] = response.json()
    return run


async def create_task(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    response = await client.post("/v1/tasks", json={"title": "a task", **fields})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def project() -> str:
    """A project of the test's own: its board, sprints, workspace and task lists."""
    return unique("project")


async def create_workflow(client: httpx.AsyncClient, **definition: Any) -> dict[str, Any]:
    """A workflow definition, created (a unique name unless given)."""
    response = await client.post("/v1/workflows", json={"name": unique("workflow"), **definition})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body
