"""An unexpected error is a 500 problem document (`internal`) and the keep-alive connection
it came on serves the next request; a validation error raised below the API (a command
re-validating what it built from the request) is a 422 naming the field."""

from __future__ import annotations

import logging
import traceback
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI, Request
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.db.errors import translate
from app.main import create_app
from tests.support import server as server_support
from tests.support.api import assert_problem


class _Merged(BaseModel):
    retries: int = Field(ge=0)


@pytest.fixture
async def probed(
    settings: Settings, clean_db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    """The service plus routes of the test's own, behind a client with one connection."""

    def with_probes(settings: Settings) -> FastAPI:
        app = create_app(settings)

        @app.get("/probe/port")
        async def port(request: Request) -> dict[str, int]:
            assert request.client is not None
            return {"port": request.client.port}  # the client's end of the connection

        @app.post("/probe/boom")
        async def boom() -> None:
            raise RuntimeError("a bug")

        @app.post("/probe/translated")
        async def translated() -> None:  # as a failed write comes back from the TaskEngine
            raise translate(RuntimeError("what actually failed"))

        @app.post("/probe/merged")
        async def merged() -> None:
            _Merged.model_validate({"retries": -1})

        return app

    monkeypatch.setattr(server_support, "create_app", with_probes)
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with (
        server_support.running_server(settings) as url,
        httpx.AsyncClient(base_url=url, timeout=10, limits=limits) as http,
    ):
        yield http


async def _port(client: httpx.AsyncClient) -> int:
    response = await client.get("/probe/port")
    assert response.status_code == 200, response.text
    port: int = response.json()["port"]
    return port


async def test_after_an_unexpected_error_the_connection_serves_the_next_request(
    probed: httpx.AsyncClient,
) -> None:
    before = await _port(probed)
    for _ in range(3):
        boom = await probed.post("/probe/boom", json={})
        assert_problem(boom, 500, "internal")
        assert boom.headers.get("connection") != "close"
        assert await _port(probed) == before  # the same connection, still open


async def test_the_log_of_an_internal_error_names_what_actually_failed(
    probed: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="app.http.problems"):
        assert_problem(await probed.post("/probe/translated", json={}), 500, "internal")
    (record,) = [r for r in caplog.records if r.name == "app.http.problems"]
    assert record.exc_info is not None
    assert "what actually failed" in "".join(traceback.format_exception(*record.exc_info))


async def test_a_validation_error_below_the_api_is_a_422_naming_the_field(
    probed: httpx.AsyncClient,
) -> None:
    before = await _port(probed)
    problem = assert_problem(await probed.post("/probe/merged", json={}), 422, "validation_error")
    assert [e["field"] for e in problem["errors"]] == ["retries"]
    assert await _port(probed) == before


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v1/tasks", {"GET", "POST"}),
        ("PUT", "/v1/tasks/task_x", {"GET", "PATCH", "DELETE"}),
        ("DELETE", "/v1/agents", {"GET", "POST"}),
        ("PUT", "/v1/workflows/wf_x", {"GET", "PATCH", "DELETE"}),
    ],
)
async def test_a_405_allows_every_method_served_on_the_path(
    client: httpx.AsyncClient, method: str, path: str, allowed: set[str]
) -> None:
    response = await client.request(method, path)
    assert_problem(response, 405, "method_not_allowed")
    assert {m.strip() for m in response.headers["allow"].split(",")} == allowed
    for each in allowed:  # each one is served (not another 405)
        assert (await client.request(each, path, json={})).status_code != 405
