"""Helpers for API tests: create through HTTP, check problem documents."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from app.core.shapes import Problem, ValidationProblem
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
