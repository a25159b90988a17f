"""Helpers for API tests: create through HTTP, check problem documents."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx

from app.schemas.common import Problem, ValidationProblem
from tests.support.sse import SseReader


async def first_task_run(client: httpx.AsyncClient, task_id: str, timeout_s: float = 20) -> str:
    """The id of the first run dispatched for a task (the dispatch follows the task's
    creation asynchronously): read from its lane's stream, from the start."""
    path = f"/v1/lanes/task:{task_id}/events"
    async with (
        asyncio.timeout(timeout_s),
        client.stream("GET", path, params={"last_event_id": 0}) as stream,
    ):
        [event] = await SseReader(stream).take(1)
    return str(event.data["run_id"])


async def create_task(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    response = await client.post("/v1/tasks", json={"title": "a task", **fields})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def scripted_agent(
    http: httpx.Client, name: str, script: Sequence[object], **fields: Any
) -> dict[str, Any]:
    """An agent whose model plays `script`, a turn per model call (sync: for tests that
    drive real processes)."""
    model = {"provider": "scripted", "name": "s", "script": script}
    response = http.post("/v1/agents", json={"name": name, **fields, "model": model})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def assert_problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["code"] == code
    assert body["status"] == status
    assert body["type"].endswith(code)
    assert body["title"] and body["detail"]
    # As the OpenAPI document publishes it: a 422 names its fields, every code is listed.
    (ValidationProblem if status == 422 else Problem).model_validate(body)
    return body
