"""The event outbox: per-stream sequence numbers, appends, replay reads and NOTIFY."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import EVENTS, Event, EventStream

NOTIFY_CHANNEL = "loopwright_events"

_claim_seqs = text(
    "INSERT INTO event_streams (stream, last_seq) VALUES (:stream, :n) "
    "ON CONFLICT (stream) DO UPDATE SET last_seq = event_streams.last_seq + :n "
    "RETURNING last_seq"
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
    """Append in order and return the sequence numbers. The stream's counter row stays
    locked until commit, so sequence numbers become visible in order, without gaps."""
    if not events:
        return []
    last = (await session.execute(_claim_seqs, {"stream": stream, "n": len(events)})).scalar_one()
    first = last - len(events) + 1
    await session.execute(
        insert(EVENTS),
        [
            {"stream": stream, "seq": first + i, "type": e.type, "data": e.data, "created_at": now}
            for i, e in enumerate(events)
        ],
    )
    # Delivered by Postgres at commit, to every process listening: a wake-up, not the data.
    payload = json.dumps({"stream": stream, "seq": last})
    await session.execute(select(func.pg_notify(NOTIFY_CHANNEL, payload)))
    return list(range(first, last + 1))


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
