"""`X-Request-ID`: the client's (when printable and short) or a new one, on every response
(problem documents, the body limit's 413, SSE, an unexpected 500) and on the log records
of that request."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.main import create_app
from app.telemetry.logs import RequestIdFilter
from tests.support import server as server_support
from tests.support.api import assert_problem

PROBE_LOGGER = "tests.request_ids"
UNEXPECTED_LOGGER = "app.http.request_ids"  # logs the traceback of an unexpected error


class Records(logging.Handler):
    """Keeps the records of one logger, stamped as the service's handler stamps them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.addFilter(RequestIdFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    loggers = [logging.getLogger(PROBE_LOGGER), logging.getLogger(UNEXPECTED_LOGGER)]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler
    for logger in loggers:
        logger.removeHandler(handler)


@pytest.fixture
async def probed(
    settings: Settings, clean_db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    """The service plus two routes of the test's own: one logs, one fails unexpectedly."""

    def with_probes(settings: Settings) -> FastAPI:
        app = create_app(settings)

        @app.get("/probe/log")
        async def log_something() -> dict[str, bool]:
            logging.getLogger(PROBE_LOGGER).warning("inside the request")
            return {"ok": True}

        @app.get("/probe/boom")
        async def boom() -> None:
            raise RuntimeError("a bug")

        return app

    monkeypatch.setattr(server_support, "create_app", with_probes)
    async with (
        server_support.running_server(settings) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as http,
    ):
        yield http


def _the_id(response: httpx.Response) -> str:
    (request_id,) = response.headers.get_list("X-Request-ID")  # exactly one
    return request_id


async def test_without_one_each_response_gets_a_new_id(client: httpx.AsyncClient) -> None:
    first = _the_id(await client.get("/healthz"))
    second = _the_id(await client.get("/v1/tasks"))
    assert first.startswith("req_") and second.startswith("req_") and first != second


async def test_a_clients_id_comes_back_on_every_kind_of_response(
    probed: httpx.AsyncClient,
) -> None:
    mine = "trace-7f3a/42:x_y.z~!"
    headers = {"X-Request-ID": mine}
    created = await probed.post("/v1/tasks", json={"title": "t"}, headers=headers)
    assert created.status_code == 201 and _the_id(created) == mine
    task_url = f"/v1/tasks/{created.json()['id']}"
    refusals = [
        (await probed.get("/v1/tasks/task_missing", headers=headers), 404, "not_found"),
        (await probed.put("/v1/tasks", headers=headers), 405, "method_not_allowed"),
        (
            await probed.patch(task_url, json={"title": "u"}, headers={**headers, "If-Match": "x"}),
            422,
            "validation_error",
        ),
        (  # refused by the input guard, before any route
            await probed.get("/v1/tasks?assigned_to=%00", headers=headers),
            422,
            "validation_error",
        ),
        (  # refused by the body limit, before the guard
            await probed.post(
                "/v1/tasks",
                content=b'{"title": "' + b"x" * 2_000_000 + b'"}',
                headers={**headers, "content-type": "application/json"},
            ),
            413,
            "payload_too_large",
        ),
        (await probed.get("/probe/boom", headers=headers), 500, "internal"),
    ]
    for response, status, code in refusals:
        assert_problem(response, status, code)
        assert _the_id(response) == mine, (status, code)
    async with probed.stream("GET", "/v1/tasks/events", headers=headers) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert _the_id(stream) == mine


@pytest.mark.parametrize("offered", [b"", b"has space", b"x" * 129, b"caf\xe9", b"tab\there"])
async def test_an_unfit_id_is_replaced_by_a_new_one(
    client: httpx.AsyncClient, offered: bytes
) -> None:
    given = _the_id(await client.get("/healthz", headers={b"X-Request-ID": offered}))
    assert given.startswith("req_") and given.encode() != offered


async def test_the_longest_fit_id_is_kept(client: httpx.AsyncClient) -> None:
    longest = "a" * 128
    assert _the_id(await client.get("/healthz", headers={"X-Request-ID": longest})) == longest


async def test_records_logged_for_a_request_carry_its_id(
    probed: httpx.AsyncClient, records: Records
) -> None:
    response = await probed.get("/probe/log", headers={"X-Request-ID": "log-me"})
    assert response.status_code == 200
    generated = _the_id(await probed.get("/probe/log"))
    logging.getLogger(PROBE_LOGGER).warning("outside any request")
    inside = [r for r in records.records if r.name == PROBE_LOGGER]
    assert [(r.getMessage(), r.__dict__["request_id"]) for r in inside] == [
        ("inside the request", "log-me"),
        ("inside the request", generated),
        ("outside any request", None),
    ]
    # The record of an unexpected error (with its traceback) names the request too.
    boom = await probed.get("/probe/boom", headers={"X-Request-ID": "boom-1"})
    assert boom.status_code == 500
    errors = [r for r in records.records if r.name == UNEXPECTED_LOGGER]
    assert [r.__dict__["request_id"] for r in errors] == ["boom-1"]
    assert errors[0].exc_info is not None
