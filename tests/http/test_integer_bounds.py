"""Every integer a client sends is bounded by the column it meets: past it (or not ASCII
digits) the answer is a 422 `validation_error` naming the field, never a 500 and never an
SSE stream that opens and then fails each read. At the bound itself, the request works."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.core.bounds import EVENT_ID_MAX, POSITION_MAX, VERSION_MAX
from tests.support.api import assert_problem
from tests.support.factories import (
    create_task,
    create_workflow,
    make_agent,
    settle,
    start_run,
    unique,
)

# Header values go out as latin-1 bytes: '²' is b"\xb2", a digit to str.isdigit but not
# to int(); the others overflow the BIGINT, the INTEGER, and int()'s 4,300-digit limit.
SUPERSCRIPT_TWO = b"\xb2"
HUGE = b"9" * 5_000


async def _status_and_problem(
    client: httpx.AsyncClient, url: str, **options: Any
) -> tuple[int, dict[str, Any] | None]:
    """An SSE endpoint's answer without waiting on an open stream: its status, and the
    problem document when it refused."""
    async with client.stream("GET", url, **options) as response:
        if response.headers["content-type"].startswith("text/event-stream"):
            return response.status_code, None
        await response.aread()
        return response.status_code, assert_problem(response, 422, "validation_error")


async def _scripted_run(client: httpx.AsyncClient) -> dict[str, Any]:
    agent = await make_agent(client, {"text": "done"})
    settled = await settle(client, (await start_run(client, agent["id"], input="hi"))["id"])
    assert settled["status"] == "completed", settled
    return settled


@pytest.mark.parametrize(
    "header",
    [SUPERSCRIPT_TWO, str(EVENT_ID_MAX + 1).encode(), HUGE, b"-1", b"+5", b"1e3", b"0x10"],
)
async def test_a_last_event_id_header_past_the_bigint_or_not_ascii_digits_is_a_422(
    client: httpx.AsyncClient, header: bytes
) -> None:
    status, problem = await _status_and_problem(
        client, "/v1/tasks/events", headers={"Last-Event-ID": header}
    )
    assert status == 422 and problem is not None
    assert problem["errors"][0]["field"] == "header.Last-Event-ID"


async def test_every_stream_bounds_its_resume_point(client: httpx.AsyncClient) -> None:
    run = await _scripted_run(client)
    streams = [
        "/v1/tasks/events",
        "/v1/runs/events",
        f"/v1/runs/{run['id']}/events",
        "/v1/approvals/events",
        "/v1/workflow-executions/wfx_unknown/events",  # the resume point is read first
    ]
    for url in streams:
        status, problem = await _status_and_problem(
            client, url, params={"last_event_id": str(EVENT_ID_MAX + 1)}
        )
        assert status == 422 and problem is not None, url
        assert problem["errors"][0]["field"] == "query.last_event_id"
        status, problem = await _status_and_problem(
            client, url, headers={"Last-Event-ID": SUPERSCRIPT_TWO}
        )
        assert status == 422 and problem is not None, url
        assert problem["errors"][0]["field"] == "header.Last-Event-ID"


@pytest.mark.parametrize(
    "headers",
    [
        {"Last-Event-ID": str(EVENT_ID_MAX)},
        {"Last-Event-ID": "0" * 40 + "7"},  # leading zeros do not count against the bound
    ],
)
async def test_a_resume_point_within_the_bound_opens_the_stream(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    status, _ = await _status_and_problem(client, "/v1/tasks/events", headers=headers)
    assert status == 200
    status, _ = await _status_and_problem(
        client, "/v1/tasks/events", params={"last_event_id": str(EVENT_ID_MAX)}
    )
    assert status == 200


@pytest.mark.parametrize(
    "if_match", [b'"' + SUPERSCRIPT_TWO + b'"', f'"{VERSION_MAX + 1}"'.encode(), HUGE, b'"0"']
)
async def test_an_if_match_past_the_integer_or_not_ascii_digits_is_a_422(
    client: httpx.AsyncClient, if_match: bytes
) -> None:
    task = await create_task(client)
    workflow = await create_workflow(client)
    agent = await make_agent(client, {"text": "x"})
    headers = {b"If-Match": if_match}
    for method, url, body in [
        ("PATCH", f"/v1/tasks/{task['id']}", {"title": "x"}),
        ("DELETE", f"/v1/tasks/{task['id']}", None),
        ("PATCH", f"/v1/workflows/{workflow['id']}", {"name": unique("x")}),
        ("DELETE", f"/v1/workflows/{workflow['id']}", None),
        ("PATCH", f"/v1/agents/{agent['id']}", {"role": "x"}),
        ("DELETE", f"/v1/agents/{agent['id']}", None),
        ("POST", "/v1/approvals/apr_unknown/approve", None),
        ("POST", "/v1/approvals/apr_unknown/reject", {"reason": "no"}),
    ]:
        response = await client.request(method, url, json=body, headers=headers)
        problem = assert_problem(response, 422, "validation_error")
        assert problem["errors"][0]["field"] == "header.If-Match", (method, url)
    assert (await client.get(f"/v1/tasks/{task['id']}")).json() == task


async def test_an_if_match_at_the_bound_is_a_version_conflict_not_a_refusal(
    client: httpx.AsyncClient,
) -> None:
    task = await create_task(client)
    response = await client.patch(
        f"/v1/tasks/{task['id']}", json={"title": "x"}, headers={"If-Match": f'"{VERSION_MAX}"'}
    )
    assert assert_problem(response, 409, "version_conflict")["current_version"] == 1


@pytest.mark.parametrize("version", [VERSION_MAX + 1, 2**63, 10**30])
async def test_versions_in_bodies_past_the_integer_are_a_422(
    client: httpx.AsyncClient, version: int
) -> None:
    task = await create_task(client, assigned_to=unique("ann"))
    workflow = await create_workflow(client)
    for url, body, field in [
        (
            f"/v1/tasks/{task['id']}/transitions",
            {"to": "in_progress", "expected_version": version},
            "expected_version",
        ),
        (f"/v1/tasks/{task['id']}/cancel", {"expected_version": version}, "expected_version"),
    ]:
        problem = assert_problem(await client.post(url, json=body), 422, "validation_error")
        assert problem["errors"][0]["field"] == field
    patched = await client.patch(
        f"/v1/workflows/{workflow['id']}", json={"name": unique("x"), "version": version}
    )
    assert assert_problem(patched, 422, "validation_error")["errors"][0]["field"] == "version"
    assert (await client.get(f"/v1/tasks/{task['id']}")).json() == task


async def test_a_message_position_past_the_integer_is_a_422(client: httpx.AsyncClient) -> None:
    run = await _scripted_run(client)
    url = f"/v1/conversations/{run['conversation_id']}/messages"
    for after in [POSITION_MAX + 1, 3_000_000_000, 2**63]:
        response = await client.get(url, params={"after": after})
        problem = assert_problem(response, 422, "validation_error")
        assert problem["errors"][0]["field"] == "query.after"
    at_bound = await client.get(url, params={"after": POSITION_MAX})
    assert at_bound.status_code == 200 and at_bound.json() == []
    assert len((await client.get(url, params={"after": -1})).json()) == 2


@pytest.mark.parametrize(
    ("url", "params", "field"),
    [
        ("/v1/tasks", {"limit": 10**30}, "query.limit"),
        ("/v1/runs", {"limit": 201}, "query.limit"),
        ("/v1/runs/run_unknown/wait", {"timeout_s": "nan"}, "query.timeout_s"),
        ("/v1/runs/run_unknown/wait", {"timeout_s": "inf"}, "query.timeout_s"),
        ("/v1/runs/run_unknown/wait", {"timeout_s": "1e400"}, "query.timeout_s"),
    ],
)
async def test_the_other_numbers_in_queries_are_bounded(
    client: httpx.AsyncClient, url: str, params: dict[str, str | int], field: str
) -> None:
    problem = assert_problem(await client.get(url, params=params), 422, "validation_error")
    assert problem["errors"][0]["field"] == field
