"""Input Postgres cannot store (a NUL, a lone surrogate, NaN or an infinity) is a 422 naming
the field wherever it comes in (path, query, body, an object's key or a free-form value),
never a 500; text that only looks like it (escaped, or real non-ASCII) goes through."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.api import assert_problem
from tests.support.factories import create_task, create_workflow, make_agent, project

JSON = {"content-type": "application/json"}


async def _task_count(client: httpx.AsyncClient, mine: str) -> int:
    return len((await client.get("/v1/tasks", params={"project": mine})).json()["items"])


def _in_project(raw: bytes, mine: str) -> bytes:
    """A refused task body naming the project `mine` first (nothing may be stored in it):
    an object gets the field; anything else becomes its title."""
    field = b'{"project": "%s", ' % mine.encode()
    return field + raw[1:] if raw.startswith(b"{") else field + b'"title": ' + raw + b"}"


def _fields(response: httpx.Response) -> list[str]:
    problem = assert_problem(response, 422, "validation_error")
    return [error["field"] for error in problem["errors"]]


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/v1/tasks/a%00b", "path"),
        ("/v1/lanes/a%00b", "path"),
        ("/v1/tasks?assigned_to=a%00b", "query.assigned_to"),
        ("/v1/runs?lane=x&conversation_id=%00", "query.conversation_id"),
    ],
)
async def test_a_nul_in_the_path_or_query_is_a_422(
    client: httpx.AsyncClient, url: str, field: str
) -> None:
    assert _fields(await client.get(url)) == [field]


async def test_a_forged_cursor_holding_a_nul_is_a_422(client: httpx.AsyncClient) -> None:
    # A cursor is hex of visible ASCII: a NUL (00), a control character or a byte past
    # ASCII (what a surrogate's UTF-8 starts with) is refused before it reaches Postgres.
    for cursor in ["7461736b5f00", "7461736b5f1f", "eda080", "746"]:
        response = await client.get("/v1/tasks", params={"cursor": cursor})
        assert _fields(response) == ["query.cursor"]


@pytest.mark.parametrize(
    ("raw", "fields"),
    [
        (b'{"title": "a\\u0000b"}', ["title"]),
        (b'{"title": "x", "budget_limit": Infinity}', ["budget_limit"]),
        (b'{"title": "x", "budget_limit": -Infinity}', ["budget_limit"]),
        (b'{"title": "x", "budget_limit": NaN}', ["budget_limit"]),
        (b'{"title": "x", "budget_limit": 1e400}', ["budget_limit"]),
        (b'{"title": "x", "acceptance_criteria": ["ok", "\\u0000"]}', ["acceptance_criteria.1"]),
        (b'{"title": "\\ud800"}', ["title"]),
        (b'{"title": "\xed\xa0\x80"}', ["title"]),  # a surrogate in UTF-8 bytes
        (b'{"title": 1' + b"0" * 5_000 + b"}", ["body"]),  # int() refuses 4,301 digits
        (b'{"title": "\xff"}', ["body"]),  # not UTF-8
        (b"[" * 100_000 + b"]" * 100_000, ["body"]),  # deeper than the parser's stack
    ],
)
async def test_unstorable_task_bodies_are_a_422_and_create_nothing(
    client: httpx.AsyncClient, raw: bytes, fields: list[str]
) -> None:
    mine = project()
    body = _in_project(raw, mine)
    assert _fields(await client.post("/v1/tasks", content=body, headers=JSON)) == fields
    assert await _task_count(client, mine) == 0


@pytest.mark.parametrize(
    ("metadata", "fields"),
    [
        (b'{"note": NaN}', ["metadata.note"]),
        (b'{"a\\u0000": 1}', ["metadata.a\\x00"]),
        (b'{"\\udc00": 1}', ["metadata.\\udc00"]),
        (b'{"deep": [{"x": "\\u0000"}, Infinity]}', ["metadata.deep.0.x", "metadata.deep.1"]),
    ],
)
async def test_free_form_objects_are_checked_too(
    client: httpx.AsyncClient, metadata: bytes, fields: list[str]
) -> None:
    agent_id = (await make_agent(client, {"text": "x"}))["id"]
    raw = b'{"agent_id": "%s", "input": "hi", "metadata": %s}' % (agent_id.encode(), metadata)
    assert _fields(await client.post("/v1/runs", content=raw, headers=JSON)) == fields
    assert (await client.get("/v1/runs", params={"agent_id": agent_id})).json()["items"] == []


async def test_an_activation_context_is_checked(client: httpx.AsyncClient) -> None:
    workflow = await create_workflow(client)
    response = await client.post(
        f"/v1/workflow-executions/activate/{workflow['id']}",
        content=b'{"context": {"env": NaN}}',
        headers=JSON,
    )
    assert _fields(response) == ["context.env"]


async def test_lookalikes_go_through(client: httpx.AsyncClient) -> None:
    """An escaped backslash before `u0000` is six characters of text, a surrogate pair is
    one character, and a content type FastAPI does not read as JSON is not read here."""
    title = "a\\u0000 caf\u00e9 \U0001f600"
    raw = b'{"title": "a\\\\u0000 caf\\u00e9 \\ud83d\\ude00"}'
    created = await client.post("/v1/tasks", content=raw, headers=JSON)
    assert created.status_code == 201, created.text
    assert created.json()["title"] == title
    task: dict[str, Any] = await create_task(client, budget_limit=1e308)
    assert task["budget_limit"] == 1e308
    as_text = await client.post(
        "/v1/tasks", content=b'{"title": NaN}', headers={"content-type": "text/plain"}
    )
    assert as_text.status_code == 422
