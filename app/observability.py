"""Structured logs: a JSON formatter, and the one call that logs a committed event."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

_events = logging.getLogger("loopwright.events")

# Payload fields too big for a log line (the SSE stream and the API carry them).
_BULKY = frozenset({"content", "result", "task", "question"})


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(getattr(record, "fields", {}))
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)


def log_events(events: Iterable[tuple[str, dict[str, Any]]], **context: Any) -> None:
    """Log events that were committed (never before: a rolled-back event did not happen)."""
    if not _events.isEnabledFor(logging.INFO):
        return
    for event_type, data in events:
        fields = {k: v for k, v in data.items() if k not in _BULKY}
        _events.info(event_type, extra={"fields": {"event": event_type, **context, **fields}})
