"""Server-Sent Events over the events table: replay after `Last-Event-ID`, then live.

The generator subscribes to the bus before its first read, so a change committed between
the replay and the wait still wakes it; every read starts after the last id sent, so
nothing is sent twice. It holds no session between reads.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Header, Query
from sqlalchemy.exc import SQLAlchemyError
from sse_starlette import EventSourceResponse, ServerSentEvent

from app.api.headers import decimal
from app.core.errors import ValidationFailed
from app.engine.services import Services
from app.schemas.bounds import EVENT_ID_MAX
from app.store import events as event_store

log = logging.getLogger(__name__)

# The two ways a client says where to resume (see `resume_point`), for every SSE endpoint.
# Event ids are BIGINT: a larger one could never be reached, and Postgres refuses it as a
# parameter, so the stream would open and then fail every read.
LastEventIdHeader = Annotated[
    str | None, Header(alias="Last-Event-ID", description="Resume after this event id.")
]
LastEventIdQuery = Annotated[
    int | None,
    Query(alias="last_event_id", ge=0, le=EVENT_ID_MAX, description="Resume after this event id."),
]


def resume_point(header: str | None, query: int | None) -> int | None:
    """The sequence number a client last saw: the `Last-Event-ID` header wins over the
    `last_event_id` query parameter (browsers' EventSource sends the header on reconnect)."""
    if header is not None and header.strip():
        value = decimal(header.strip(), EVENT_ID_MAX)
        if value is None:
            raise ValidationFailed.field(
                "header.Last-Event-ID", f"must be an event id (an integer from 0 to {EVENT_ID_MAX})"
            )
        return value
    return query


async def open_stream(services: Services, stream: str, after: int | None) -> EventSourceResponse:
    """Without a resume point the stream starts at its current end (live events only)."""
    if after is None:
        async with services.sessionmaker() as session:
            after = await event_store.last_seq(session, stream)
    settings = services.settings.streams
    return EventSourceResponse(
        _events(services, stream, after),
        ping=settings.keepalive_s,
        shutdown_event=services.shutting_down,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _events(services: Services, stream: str, after: int) -> AsyncIterator[ServerSentEvent]:
    settings = services.settings.streams
    with services.bus.subscribe(stream) as wake:
        while True:
            try:
                async with services.sessionmaker() as session:
                    batch = await event_store.read_events(
                        session, stream, after=after, limit=settings.replay_batch
                    )
            except (SQLAlchemyError, OSError) as exc:
                log.warning("stream %s cannot read events (%s); retrying", stream, exc)
                batch = []
            for event in batch:
                data = {**event.data, "at": event.created_at.isoformat()}
                yield ServerSentEvent(data=json.dumps(data), event=event.type, id=str(event.seq))
                after = event.seq
            # Previews without an id: a reconnecting client resumes from persisted events.
            for event_type, data in wake.take_ephemeral():
                yield ServerSentEvent(data=json.dumps(data), event=event_type)
            if len(batch) < settings.replay_batch:
                await wake.wait(settings.poll_interval_s)
