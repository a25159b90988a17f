"""Every event a test reads from a stream is one the OpenAPI document publishes for that
stream (`app/events/api/stream_docs.py`): its name is listed, it validates against its model, and
its data has no field the model does not document."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from app.core.streams import run_stream
from app.events.api import stream_docs
from app.events.api.stream_docs import EventStream, event_names
from app.events.api.streams import read_stream

# Each stream's path, as the routes spell it.
_STREAMS: list[tuple[re.Pattern[str], EventStream]] = [
    (re.compile(r"^/v1/tasks/events$"), stream_docs.TASKS),
    (re.compile(r"^/v1/approvals/events$"), stream_docs.APPROVALS),
    (re.compile(r"^/v1/triggers/events$"), stream_docs.TRIGGERS),
    (re.compile(r"^/v1/runs/events$"), stream_docs.RUNS_BOARD),
    (re.compile(r"^/v1/runs/[^/]+/events$"), stream_docs.RUN),
    (re.compile(r"^/v1/lanes/.+/events$"), stream_docs.LANE),
    (re.compile(r"^/v1/workflow-executions/[^/]+/events$"), stream_docs.WORKFLOW_EXECUTION),
    (re.compile(r"^/v1/coordinations/[^/]+/events$"), stream_docs.COORDINATION),
    (re.compile(r"^/v1/webhooks/events$"), stream_docs.WEBHOOKS),
    (re.compile(r"^/v1/budgets/events$"), stream_docs.BUDGETS),
    (re.compile(r"^/v1/sprints/events$"), stream_docs.SPRINTS),
    (re.compile(r"^/v1/worktrees/events$"), stream_docs.WORKTREES),
]


def stream_of(path: str) -> EventStream | None:
    return next((stream for pattern, stream in _STREAMS if pattern.match(path)), None)


def _model_for(stream: EventStream, name: str) -> type[BaseModel]:
    matching = [
        event
        for event in stream.events
        if name in event_names(event)
        or ("agent.*" in event_names(event) and name.startswith("agent."))
    ]
    assert len(matching) == 1, f"{stream.name} does not publish `{name}`"
    return matching[0]


def _undocumented(model: type[BaseModel], data: dict[str, Any]) -> set[str]:
    if model.model_config.get("extra") == "allow":
        return set()
    names = {field.alias or name for name, field in model.model_fields.items()}
    return set(data) - names


def assert_documented(path: str, event: str, event_id: str | None, data: Any) -> None:
    stream = stream_of(path)
    assert stream is not None, f"no published events for {path}"
    check(stream, path, event, event_id, data)


def check(stream: EventStream, where: str, event: str, event_id: str | None, data: Any) -> None:
    model = _model_for(stream, event)
    envelope = {"event": event, "data": data} | ({"id": event_id} if event_id else {})
    model.model_validate(envelope)
    data_model = model.model_fields["data"].annotation
    assert isinstance(data_model, type) and issubclass(data_model, BaseModel)
    extra = _undocumented(data_model, data)
    assert not extra, f"`{event}` on {where} sends undocumented fields {sorted(extra)}"


# Each stream's name in the events table (`app/core/streams.py`).
_STORED: list[tuple[re.Pattern[str], EventStream]] = [
    (re.compile(r"^tasks$"), stream_docs.TASKS),
    (re.compile(r"^approvals$"), stream_docs.APPROVALS),
    (re.compile(r"^runs$"), stream_docs.RUNS_BOARD),
    (re.compile(r"^lane:"), stream_docs.LANE),
    (re.compile(r"^workflow:"), stream_docs.WORKFLOW_EXECUTION),
    (re.compile(r"^webhooks$"), stream_docs.WEBHOOKS),
    (re.compile(r"^budgets$"), stream_docs.BUDGETS),
    (re.compile(r"^sprints$"), stream_docs.SPRINTS),
]


async def stored_events_documented(
    engine: AsyncEngine, mentioning: set[str] | None = None, runs: set[str] | None = None
) -> set[str]:
    """Checks stored events as a stream would send them (`app/events/api/streams.py`: the row's
    data and `at`, its sequence number as `id`); the event types seen. Every event, or on a
    shared database only those `mentioning` one of the ids (in their stream's name or their
    data), and a run's own stream (its history) for every run, or only the `runs` given."""
    query = "SELECT stream, seq, type, data, created_at FROM events"
    params: dict[str, Any] = {}
    if mentioning is not None:
        query += " WHERE stream LIKE ANY(:patterns) OR data::text LIKE ANY(:patterns)"
        params["patterns"] = [f"%{id_}%" for id_ in mentioning]
    async with engine.connect() as conn:
        rows = (await conn.execute(text(query), params)).all()
        if runs is None:
            runs = set((await conn.scalars(text("SELECT DISTINCT run_id FROM run_history"))).all())
    seen = set()
    for stream, seq, event, data, created_at in rows:
        published = next((s for pattern, s in _STORED if pattern.match(stream)), None)
        assert published is not None, f"no published events for stream {stream}"
        check(
            published, f"stream {stream}", event, str(seq), {**data, "at": created_at.isoformat()}
        )
        seen.add(event)
    sessions = async_sessionmaker(engine)
    for run_id in runs:  # a run's own stream is its history, as `encode_step` sends it
        async with sessions() as session:
            encoded = await read_stream(session, run_stream(run_id), 0, 100_000)
        assert encoded, run_id
        for item in encoded:
            for block in item.sse.decode().split("\r\n\r\n"):
                fields = dict(line.split(": ", 1) for line in block.split("\r\n") if ": " in line)
                if "event" not in fields:
                    continue
                where = f"stream run:{run_id}"
                data = json.loads(fields["data"])
                check(stream_docs.RUN, where, fields["event"], fields["id"], data)
                seen.add(fields["event"])
    return seen
