"""Event streams (the outbox every SSE stream reads) and idempotency keys."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Index,
    Table,
    Text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base
from app.models.common import now_column


class EventStream(Base):
    """The last sequence number handed out per stream. Its row lock orders writers, so a
    reader never sees sequence n+1 committed before n."""

    __tablename__ = "event_streams"

    stream: Mapped[str] = mapped_column(Text, primary_key=True)
    last_seq: Mapped[int] = mapped_column(BigInteger)


class Event(Base):
    """An event in a stream (the outbox): written in the transaction of the change."""

    __tablename__ = "events"

    stream: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    type: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = now_column()


class IdempotencyKey(Base):
    """A client's Idempotency-Key with the request it answered and the response it got;
    remembered for a window, after which the sweep deletes it (oldest first, by
    `created_at`)."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (Index(None, "created_at"),)

    scope: Mapped[str] = mapped_column(Text, primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    request_hash: Mapped[str] = mapped_column(Text)
    resource_id: Mapped[str] = mapped_column(Text)
    response: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = now_column()


EVENTS = cast(Table, Event.__table__)
IDEMPOTENCY_KEYS = cast(Table, IdempotencyKey.__table__)
