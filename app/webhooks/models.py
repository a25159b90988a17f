"""Outbound webhooks: subscriptions, their deliveries (the outbox a database trigger on
`events` fills in the event's own transaction, migration 0012), and each delivery's
attempts."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.core.states import DeliveryStatus
from app.db.base import Base
from app.db.columns import now_column, one_of


class Webhook(Base):
    """A URL subscribed to event types (`WebhookEventType`). `secret` signs every delivery
    (HMAC-SHA256, `app/core/signatures.py`); only an enabled webhook gets new deliveries."""

    __tablename__ = "webhooks"
    __table_args__ = (
        CheckConstraint("cardinality(event_types) > 0", name="event_types"),
        CheckConstraint("version >= 1", name="version"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text)
    event_types: Mapped[list[str]] = mapped_column(ARRAY(Text))
    secret: Mapped[str] = mapped_column(Text)
    enabled: Mapped[bool] = mapped_column(Boolean)
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = now_column()
    updated_at: Mapped[datetime] = now_column()


class WebhookDelivery(Base):
    """One event to one webhook: `payload` is the JSON body POSTed (the envelope with the
    event's type, stream, sequence number, time and data). One per event and webhook.

    `attempts` counts every attempt ever made; it is also the claim's fence: a deliverer
    records an outcome only while the count is the one its claim set. The retry schedule
    and the attempt limit count from `attempts_before_redeliver`, the attempts made before
    its latest redeliver. A deliverer holds it while `locked_until` is ahead: a process
    killed mid-attempt leaves it to another once that passes."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        one_of("status", DeliveryStatus),
        CheckConstraint("attempts >= attempts_before_redeliver", name="attempts"),
        CheckConstraint("attempts_before_redeliver >= 0", name="attempts_before_redeliver"),
        UniqueConstraint("webhook_id", "stream", "seq"),
        # A webhook's delivery log, newest first.
        Index(None, "webhook_id", "id"),
        # The deliverers' question: which deliveries are due?
        Index(
            "ix_webhook_deliveries_due",
            "next_attempt_at",
            postgresql_where=text("status = 'pending'"),
        ),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    webhook_id: Mapped[str] = mapped_column(Text, ForeignKey("webhooks.id", ondelete="CASCADE"))
    event_type: Mapped[str] = mapped_column(Text)
    stream: Mapped[str] = mapped_column(Text)
    seq: Mapped[int] = mapped_column(BigInteger)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    status: Mapped[str] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer)
    attempts_before_redeliver: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    locked_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The latest attempt's outcome (each attempt's is in webhook_delivery_attempts).
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_latency_ms: Mapped[int | None] = mapped_column(Integer)
    last_response: Mapped[str | None] = mapped_column(Text)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = now_column()
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class WebhookDeliveryAttempt(Base):
    """One attempt at a delivery: what the receiver answered (or why nothing came back),
    and how long it took."""

    __tablename__ = "webhook_delivery_attempts"

    delivery_id: Mapped[str] = mapped_column(
        Text, ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), primary_key=True
    )
    attempt: Mapped[int] = mapped_column(Integer, primary_key=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    succeeded: Mapped[bool] = mapped_column(Boolean)
    status_code: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[int] = mapped_column(Integer)
    response_excerpt: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)


WEBHOOKS = cast(Table, Webhook.__table__)
WEBHOOK_DELIVERIES = cast(Table, WebhookDelivery.__table__)
WEBHOOK_DELIVERY_ATTEMPTS = cast(Table, WebhookDeliveryAttempt.__table__)
