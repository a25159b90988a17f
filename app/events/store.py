"""The event outbox: per-stream sequence numbers, appends, replay reads and NOTIFY."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.driver import driver_connection, json_text
from app.events.models import Event, EventStream

NOTIFY_CHANNEL = "loopwright_events"

# One statement claims the sequence numbers, inserts the events and queues the NOTIFY.
# The counter row stays locked until commit, so sequence numbers become visible in order
# and without gaps; the notification (a wake-up, not the data) is delivered at commit.
_APPEND = text(
    """
    WITH claim AS (
        INSERT INTO event_streams (stream, last_seq) VALUES (:stream, :n)
        ON CONFLICT (stream) DO UPDATE SET last_seq = event_streams.last_seq + :n
        RETURNING last_seq
    ), appended AS (
        INSERT INTO events (stream, seq, type, data, created_at)
        SELECT :stream, claim.last_seq - :n + e.ordinality, e.value->>'type', e.value->'data',
               :now
        FROM claim, jsonb_array_elements(CAST(:events AS jsonb)) WITH ORDINALITY AS e
    )
    SELECT last_seq,
           pg_notify(:channel, json_build_object('stream', :stream, 'seq', last_seq)::text)
    FROM claim
    """
)


@dataclass(frozen=True)
class NewEvent:
    type: str
    data: dict[str, Any]


@dataclass(frozen=True)
class StoredEvent:
    stream: str
    seq: int
    type: str
    data: dict[str, Any]
    created_at: datetime


async def append_events(
    session: AsyncSession, stream: str, events: Sequence[NewEvent], now: datetime
) -> list[int]:
    """Append in order and return the sequence numbers given to the events."""
    if not events:
        return []
    params = {
        "stream": stream,
        "n": len(events),
        "events": json.dumps([{"type": e.type, "data": e.data} for e in events]),
        "now": now,
        "channel": NOTIFY_CHANNEL,
    }
    last = (await session.execute(_APPEND, params)).scalar_one()
    return list(range(last - len(events) + 1, last + 1))


_APPEND_MANY = """
    WITH batch AS (
        SELECT * FROM jsonb_to_recordset($1::text::jsonb)
            AS e(stream text, ord int, type text, data jsonb, created_at timestamptz)
    ), counts AS (
        SELECT stream, count(*) AS n FROM batch GROUP BY stream
    ), claim AS (
        INSERT INTO event_streams (stream, last_seq)
        SELECT stream, n FROM counts ORDER BY stream
        ON CONFLICT (stream) DO UPDATE SET last_seq = event_streams.last_seq + excluded.last_seq
        RETURNING stream, last_seq
    ), appended AS (
        INSERT INTO events (stream, seq, type, data, created_at)
        SELECT b.stream,
               c.last_seq - k.n + row_number() OVER (PARTITION BY b.stream ORDER BY b.ord),
               b.type, b.data, b.created_at
        FROM batch AS b JOIN claim AS c USING (stream) JOIN counts AS k USING (stream)
    )
    SELECT stream, last_seq,
           pg_notify($2, json_build_object('stream', stream, 'seq', last_seq)::text)
    FROM claim
"""


async def append_many(
    session: AsyncSession, events: Sequence[tuple[str, NewEvent, datetime]]
) -> None:
    """Append (stream, event, created_at) triples, several streams at once, in order within
    each stream; the counter rows are taken in stream order so that concurrent writers
    cannot deadlock on them."""
    if not events:
        return
    rows = [
        {"stream": stream, "ord": i, "type": e.type, "data": e.data, "created_at": at}
        for i, (stream, e, at) in enumerate(events)
    ]
    driver = await driver_connection(session)
    await driver.execute(_APPEND_MANY, json_text(rows), NOTIFY_CHANNEL)


async def read_events(
    session: AsyncSession, stream: str, *, after: int, limit: int
) -> list[StoredEvent]:
    rows = await session.scalars(
        select(Event)
        .where(Event.stream == stream, Event.seq > after)
        .order_by(Event.seq)
        .limit(limit)
    )
    return [StoredEvent(r.stream, r.seq, r.type, r.data, r.created_at) for r in rows]


async def last_seq(session: AsyncSession, stream: str) -> int:
    value = await session.scalar(select(EventStream.last_seq).where(EventStream.stream == stream))
    return value or 0
