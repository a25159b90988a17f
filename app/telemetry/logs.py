"""Structured logs: a JSON formatter, the request id on every record logged for a request,
and the one call that logs a committed event."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import httpx

_events = logging.getLogger("loopwright.events")

# Payload fields too big for a log line (the SSE stream and the API carry them).
_BULKY = frozenset({"content", "result", "task", "question"})

# The `X-Request-ID` of the request being served (http/request_ids.py sets it); None outside
# a request, e.g. in the TaskEngine's writer, which commits many requests' mutations at once.
current_request_id: ContextVar[str | None] = ContextVar("request_id", default=None)

# uvicorn's access record: '%s - "%s %s HTTP/%s" %d' with these arguments.
_ACCESS_FIELDS = ("client", "method", "path", "http_version", "status")


class RequestIdFilter(logging.Filter):
    """Stamps each record with the current request id. A filter on the handler, not the
    formatter, reads it: handlers run in the logging caller's context, where it is set."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id.get()
        return True


class QueryRedactingFilter(logging.Filter):
    """Takes the query string out of every URL an HTTP client logs (httpx logs each request
    it sends, the `http_request` tool's included): a query may carry a token or a person's
    data, and the log is not the place for either."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(
            isinstance(a, httpx.URL) and a.query for a in record.args
        ):
            record.args = tuple(_without_query(a) for a in record.args)
        return True


def _without_query(arg: object) -> object:
    if isinstance(arg, httpx.URL) and arg.query:
        return f"{arg.copy_with(query=None)}?[redacted]"
    return arg


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id is not None:
            line["request_id"] = request_id
        if record.name == "uvicorn.access" and isinstance(record.args, tuple):
            # The access line stays as uvicorn writes it; its parts become fields to query.
            line.update(zip(_ACCESS_FIELDS, record.args, strict=False))
        line.update(getattr(record, "fields", {}))
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """The message, then its fields as `key=value` (an event's run, lane, status...)."""
        text = super().format(record)
        fields = {k: v for k, v in getattr(record, "fields", {}).items() if k != "event"}
        request_id = getattr(record, "request_id", None)
        if request_id is not None:
            fields["request_id"] = request_id
        return " ".join([text, *(f"{k}={v}" for k, v in fields.items())])


# Chatty libraries whose routine records say nothing an operator acts on: the embedded
# server's start-up steps, each migration applied. Their warnings and errors still show.
_QUIET = ("pgserver", "alembic")


def configure_logging(level: str, fmt: str) -> None:
    """One handler on the root logger, for our records and uvicorn's alike (`serve` runs
    uvicorn with `log_config=None`, so its loggers propagate here). `auto`: plain text for a
    person at a terminal, JSON for a log collector."""
    handler = logging.StreamHandler()
    if fmt == "auto":
        fmt = "text" if sys.stderr.isatty() else "json"
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RequestIdFilter())
    handler.addFilter(QueryRedactingFilter())
    logging.basicConfig(level=level, handlers=[handler], force=True)
    for name in _QUIET:
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    logging.captureWarnings(True)  # as records too, not plain text between the JSON lines


def log_events(events: Iterable[tuple[str, dict[str, Any]]], **context: Any) -> None:
    """Log events that were committed (never before: a rolled-back event did not happen)."""
    if not _events.isEnabledFor(logging.INFO):
        return
    for event_type, data in events:
        fields = {k: v for k, v in data.items() if k not in _BULKY}
        _events.info(event_type, extra={"fields": {"event": event_type, **context, **fields}})
