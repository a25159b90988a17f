"""Helpers for API tests: create through HTTP, check problem documents."""

from __future__ import annotations

from typing import Any

import httpx

from app.schemas.common import Problem, ValidationProblem


async def create_task(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    response = await client.post("/v1/tasks", json={"title": "a task", **fields})
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
