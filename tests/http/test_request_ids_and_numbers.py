"""Pure pieces of the request id and of number parsing: which ids are kept, how records
are stamped and written, and which header integers are read."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from app.http.headers import decimal
from app.http.request_ids import accepted
from app.telemetry.logs import (
    JsonFormatter,
    QueryRedactingFilter,
    RequestIdFilter,
    TextFormatter,
    current_request_id,
)


def _record(name: str, message: str, *args: object) -> logging.LogRecord:
    record = logging.LogRecord(name, logging.INFO, __file__, 1, message, args, None)
    assert RequestIdFilter().filter(record)
    return record


@pytest.mark.parametrize(
    ("text", "maximum", "value"),
    [
        ("0", 10, 0),
        ("10", 10, 10),
        ("11", 10, None),
        ("0000000000000000000000000000000000000000007", 10, 7),
        ("9" * 5_000, 2**63 - 1, None),  # never reaches int() (4,300-digit limit)
        ("\xb2", 10, None),  # '²': str.isdigit() says yes, int() says no
        ("\u0663", 10, None),  # '٣': int() would read 3; only ASCII digits count
        ("", 10, None),
        ("-1", 10, None),
        ("+1", 10, None),
        (" 1", 10, None),
    ],
)
def test_decimal_reads_bounded_ascii_digits_only(
    text: str, maximum: int, value: int | None
) -> None:
    assert decimal(text, maximum) == value


@pytest.mark.parametrize(
    ("offered", "kept"),
    [
        ("abc-123", True),
        ("a" * 128, True),
        ("a" * 129, False),
        ("", False),
        ("two words", False),
        ("caf\xe9", False),
        ("nul\x00", False),
        ("line\nbreak", False),
        (None, False),
    ],
)
def test_which_client_ids_are_kept(offered: str | None, kept: bool) -> None:
    assert accepted(offered) == (offered if kept else None)


def test_records_carry_the_request_id_in_json_and_text() -> None:
    token = current_request_id.set("req-1")
    try:
        inside = _record("app.x", "hello %s", "there")
    finally:
        current_request_id.reset(token)
    outside = _record("app.x", "plain")
    line = json.loads(JsonFormatter().format(inside))
    assert line["message"] == "hello there" and line["request_id"] == "req-1"
    assert "request_id" not in json.loads(JsonFormatter().format(outside))
    assert TextFormatter().format(inside).endswith("app.x hello there request_id=req-1")
    assert TextFormatter().format(outside).endswith("app.x plain")


def test_an_id_given_explicitly_is_not_overwritten() -> None:
    record = logging.LogRecord("app.x", logging.INFO, __file__, 1, "m", None, None)
    record.request_id = "given"
    token = current_request_id.set("ambient")
    try:
        RequestIdFilter().filter(record)
    finally:
        current_request_id.reset(token)
    assert record.__dict__["request_id"] == "given"


def test_the_access_line_keeps_its_text_and_gains_fields() -> None:
    token = current_request_id.set("req-2")
    try:
        record = _record(
            "uvicorn.access",
            '%s - "%s %s HTTP/%s" %d',
            "127.0.0.1:5000",
            "GET",
            "/v1/tasks?limit=2",
            "1.1",
            200,
        )
    finally:
        current_request_id.reset(token)
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == '127.0.0.1:5000 - "GET /v1/tasks?limit=2 HTTP/1.1" 200'
    assert {k: line[k] for k in ("method", "path", "status", "request_id", "client")} == {
        "method": "GET",
        "path": "/v1/tasks?limit=2",
        "status": 200,
        "request_id": "req-2",
        "client": "127.0.0.1:5000",
    }


def test_urls_logged_by_the_http_client_lose_their_query_string() -> None:
    url = httpx.URL("https://api.example.com/v1/items?token=s3cret&q=alice")
    record = logging.LogRecord(
        "httpx",
        logging.INFO,
        __file__,
        1,
        'HTTP Request: %s %s "%s %d %s"',
        ("GET", url, "HTTP/1.1", 200, "OK"),
        None,
    )
    assert QueryRedactingFilter().filter(record)
    line = json.loads(JsonFormatter().format(record))["message"]
    assert "s3cret" not in line and "alice" not in line
    assert "https://api.example.com/v1/items?[redacted]" in line
    plain = logging.LogRecord(
        "httpx", logging.INFO, __file__, 1, "%s", (httpx.URL("https://a.example/x"),), None
    )
    QueryRedactingFilter().filter(plain)
    assert plain.getMessage() == "https://a.example/x"


def test_plain_lines_keep_an_events_fields() -> None:
    record = _record("loopwright.events", "agent_run.completed")
    record.fields = {"event": "agent_run.completed", "run_id": "run_1", "status": "completed"}
    assert (
        TextFormatter()
        .format(record)
        .endswith("loopwright.events agent_run.completed run_id=run_1 status=completed")
    )
