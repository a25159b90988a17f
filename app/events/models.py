"""Event streams (the outbox every SSE stream reads) and idempotency keys."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Index,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.columns import now_column


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
    """An idempotency key with the request it answered and the response it got: a client's
    `Idempotency-Key`, remembered for a window, or one a run's tool call made (`run_id`),
    kept while that run may run again (`db/idempotency.py`). The sweep deletes each
    kind oldest first, by `created_at`, through an index of its own."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (
        Index(
            "ix_idempotency_keys_client_created_at",
            "created_at",
            postgresql_where=text("run_id IS NULL"),
        ),
        Index(
            "ix_idempotency_keys_run_created_at",
            "created_at",
            postgresql_where=text("run_id IS NOT NULL"),
        ),
    )

    scope: Mapped[str] = mapped_column(Text, primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    request_hash: Mapped[str] = mapped_column(Text)
    resource_id: Mapped[str] = mapped_column(Text)
    response: Mapped[dict[str, Any]] = mapped_column(JSONB)
    # The run whose tool call made the key (`spawn_child_runs`, `create_task`); NULL for a
    # client's key. Not a foreign key: runs are never deleted, and the sweep treats a
    # missing run as one that cannot run again.
    run_id: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = now_column()


EVENTS = cast(Table, Event.__table__)
IDEMPOTENCY_KEYS = cast(Table, IdempotencyKey.__table__)
