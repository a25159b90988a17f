"""Every event name the code base writes is one the OpenAPI document publishes for its
streams: a client generated from it reads an unknown `event` as an error (its enums refuse
unknown values), so a new event must be added to `app/events/schemas.py` or
`run_events.py` with its fields."""

from __future__ import annotations

import re
from pathlib import Path

from app.events.api.stream_docs import EVENT_STREAMS, event_names
from app.runs.schemas.run_events import DIAGNOSTIC_EVENTS

APP = Path(__file__).resolve().parents[2] / "app"
# Where the names are published: they are found there by definition.
PUBLISHING = {APP / "events" / "schemas.py", APP / "runs" / "schemas" / "run_events.py"}
# Written to the logs only, never to a stream.
LOGGED_ONLY = {"agent_run.dispatch_next_failed", "approval.sweep"}

STREAMS = "agent_run|task|approval|workflow|message|tool_call|trigger|sprint"
NAME = re.compile(rf"""["']((?:{STREAMS})\.[a-z_.]+)["']""")


def test_every_event_name_in_the_code_is_published() -> None:
    published = {name for stream in EVENT_STREAMS for e in stream.events for name in event_names(e)}
    written = {
        name
        for path in APP.rglob("*.py")
        if path not in PUBLISHING
        for name in NAME.findall(path.read_text())
    }
    assert written, "the pattern finds no event names: has their spelling changed?"
    assert written - LOGGED_ONLY <= published, sorted(written - LOGGED_ONLY - published)


DIAGNOSTIC = re.compile(r"""["'](agent\.[a-z_]+\.[a-z_.]+)["']""")


def test_every_diagnostic_the_loop_writes_is_listed_by_name() -> None:
    """The dashboard's EventSource subscribes to each diagnostic by its name."""
    written = {
        name
        for path in APP.rglob("*.py")
        if path not in PUBLISHING
        for name in DIAGNOSTIC.findall(path.read_text())
    }
    assert written, "the pattern finds no diagnostics: has their spelling changed?"
    assert written <= set(DIAGNOSTIC_EVENTS), sorted(written - set(DIAGNOSTIC_EVENTS))
