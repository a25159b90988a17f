"""Malformed requests get a 4xx problem document naming the field, and change nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.support.api import assert_problem
from tests.support.factories import create_task, project


async def _task_count(client: httpx.AsyncClient, mine: str) -> int:
    """The tasks of the project `mine` (each refused body here names a project of the
    test's own: nothing may be stored in it)."""
    return len((await client.get("/v1/tasks", params={"project": mine})).json()["items"])


async def test_malformed_json_is_a_validation_error_on_the_body(client: httpx.AsyncClient) -> None:
    mine = project()
    response = await client.post(
        "/v1/tasks",
        content=b'{"project": "%s", "title": ' % mine.encode(),
        headers={"content-type": "application/json"},
    )
    problem = assert_problem(response, 422, "validation_error")
    assert problem["errors"][0]["field"] == "body"
    assert await _task_count(client, mine) == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "title"),
        ({"title": ""}, "title"),
        ({"title": "x", "priority": "urgent"}, "priority"),
        ({"title": "x", "max_retries": -1}, "max_retries"),
        ({"title": "x", "budget_limit": -5}, "budget_limit"),
        ({"title": "x", "reviewers": "ann"}, "reviewers"),
        ({"title": "x", "artifacts_expected": [{"type": "code"}]}, "artifacts_expected.0.path"),
        ({"title": "x", "deadline": "next tuesday"}, "deadline"),
        ({"title": "x", "colour": "red"}, "colour"),
        ({"title": "x", "status": "completed"}, "status"),
    ],
)
async def test_invalid_create_bodies_name_the_field(
    client: httpx.AsyncClient, body: dict[str, object], field: str
) -> None:
    mine = project()
    response = await client.post("/v1/tasks", json={"project": mine, **body})
    problem = assert_problem(response, 422, "validation_error")
    assert field in [e["field"] for e in problem["errors"]]
    assert await _task_count(client, mine) == 0


async def test_unknown_ids_are_not_found(client: httpx.AsyncClient) -> None:
    for response in [
        await client.get("/v1/tasks/task_missing"),
        await client.patch("/v1/tasks/task_missing", json={"title": "x"}),
        await client.post("/v1/tasks/task_missing/transitions", json={"to": "assigned"}),
        await client.post("/v1/tasks/task_missing/cancel"),
        await client.delete("/v1/tasks/task_missing"),
        await client.get("/v1/tasks/task_missing/transitions"),
    ]:
        problem = assert_problem(response, 404, "not_found")
        assert problem["id"] == "task_missing"


async def test_oversized_bodies_are_refused_with_or_without_content_length(
    client: httpx.AsyncClient,
) -> None:
    mine = project()
    huge = b'{"project": "%s", "title": "' % mine.encode() + b"x" * 2_000_000 + b'"}'
    declared = await client.post(
        "/v1/tasks", content=huge, headers={"content-type": "application/json"}
    )
    assert_problem(declared, 413, "payload_too_large")

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the server counts
        for start in range(0, len(huge), 65_536):
            yield huge[start : start + 65_536]

    streamed = await client.post(
        "/v1/tasks", content=chunks(), headers={"content-type": "application/json"}
    )
    assert_problem(streamed, 413, "payload_too_large")
    assert await _task_count(client, mine) == 0


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "done"}, "query.status"),
        ({"priority": "whenever"}, "query.priority"),
        ({"limit": 0}, "query.limit"),
        ({"limit": "many"}, "query.limit"),
        ({"cursor": "not-a-cursor"}, "query.cursor"),
    ],
)
async def test_bad_list_parameters(
    client: httpx.AsyncClient, params: dict[str, str | int], field: str
) -> None:
    response = await client.get("/v1/tasks", params=params)
    problem = assert_problem(response, 422, "validation_error")
    assert problem["errors"][0]["field"] == field


async def test_bad_headers_and_empty_patches(client: httpx.AsyncClient) -> None:
    task = await create_task(client)
    path = f"/v1/tasks/{task['id']}"
    bad_etag = await client.patch(path, json={"title": "y"}, headers={"If-Match": "yesterday"})
    assert assert_problem(bad_etag, 422, "validation_error")["errors"][0]["field"] == (
        "header.If-Match"
    )
    empty = await client.patch(path, json={})
    assert assert_problem(empty, 422, "validation_error")["errors"][0]["field"] == "body"
    null_title = await client.patch(path, json={"title": None})
    assert assert_problem(null_title, 422, "validation_error")["errors"][0]["field"] == "title"
    bad_target = await client.post(f"{path}/transitions", json={"to": "done"})
    assert assert_problem(bad_target, 422, "validation_error")["errors"][0]["field"] == "to"
    no_assignee = await client.post(f"{path}/transitions", json={"to": "assigned"})
    problem = assert_problem(no_assignee, 422, "validation_error")
    assert problem["errors"][0]["field"] == "assigned_to"
    bad_resume = await client.get("/v1/tasks/events", headers={"Last-Event-ID": "abc"})
    problem = assert_problem(bad_resume, 422, "validation_error")
    assert problem["errors"][0]["field"] == "header.Last-Event-ID"
    assert (await client.get(path)).json() == task


async def test_unknown_routes_and_methods_are_problems(client: httpx.AsyncClient) -> None:
    assert_problem(await client.get("/v1/nothing-here"), 404, "not_found")
    assert_problem(await client.put("/v1/tasks"), 405, "method_not_allowed")
