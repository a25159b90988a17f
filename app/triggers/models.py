"""Triggers (what starts runs and executions without a client's call) and their fires."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.core.vocabulary import FireStatus
from app.db.base import Base
from app.db.columns import now_column, one_of


class Trigger(Base):
    """A webhook, schedule or chain (or another registered kind), and the run or
    execution it starts (`target`, with its templates). `config` holds the kind's own
    settings; `secret` a webhook's HMAC key; `next_fire_at` a schedule's next fire time
    (NULL while disabled). No CHECK lists the kinds: the registry of kinds
    (`engine/kinds/`) is the one list (migration 0024 says why)."""

    __tablename__ = "triggers"
    __table_args__ = (
        CheckConstraint("kind = 'webhook' OR secret IS NULL", name="secret_of_webhook"),
        CheckConstraint("kind = 'schedule' OR next_fire_at IS NULL", name="next_fire_of_schedule"),
        CheckConstraint("version >= 1", name="version"),
        # The scheduler's question: which schedules are due? Only enabled ones have a time.
        Index(
            "ix_triggers_next_fire_at",
            "next_fire_at",
            postgresql_where=text("next_fire_at IS NOT NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text)
    enabled: Mapped[bool] = mapped_column(Boolean)
    target: Mapped[dict[str, Any]] = mapped_column(JSONB)
    config: Mapped[dict[str, Any]] = mapped_column(JSONB)
    secret: Mapped[str | None] = mapped_column(Text)
    next_fire_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_fired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = now_column()
    updated_at: Mapped[datetime] = now_column()


class TriggerFire(Base):
    """One fire of a trigger. `fire_key` names the occasion (a webhook's delivery id, a
    schedule's fire time, a chain's source event): unique per trigger, so two processes
    firing the same occasion make one fire. `response` is what a webhook's first request
    was answered, replayed to a repeat of its delivery id."""

    __tablename__ = "trigger_fires"
    __table_args__ = (
        one_of("status", FireStatus),
        UniqueConstraint("trigger_id", "fire_key"),
        Index(None, "trigger_id", "fired_at"),
        # A run's or an execution's page lists the chains its end fired.
        Index(
            "ix_trigger_fires_source_id",
            "source_id",
            postgresql_where=text("source_id IS NOT NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    trigger_id: Mapped[str] = mapped_column(Text, ForeignKey("triggers.id", ondelete="CASCADE"))
    fire_key: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    fired_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    scheduled_for: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    run_id: Mapped[str | None] = mapped_column(Text)
    execution_id: Mapped[str | None] = mapped_column(Text)
    # A chain's fire: the run or execution whose end fired it.
    source_id: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    response: Mapped[dict[str, Any] | None] = mapped_column(JSONB)


class HookSignature(Base):
    """A webhook signature already accepted, kept for the tolerance window so that a
    replayed request (same timestamp and body) is refused."""

    __tablename__ = "hook_signatures"
    __table_args__ = (Index(None, "seen_at"),)

    trigger_id: Mapped[str] = mapped_column(
        Text, ForeignKey("triggers.id", ondelete="CASCADE"), primary_key=True
    )
    signature: Mapped[str] = mapped_column(Text, primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ChainEvent(Base):
    """A run settling or an execution finishing, copied here from `events` by the database
    in that event's transaction (the `events_chain_source` trigger of migration 0011) while
    any chain trigger is enabled: the chain relay fires the chains it matches, then deletes
    it. So a crash between the source's commit and its chains' fires loses nothing."""

    __tablename__ = "chain_events"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    stream: Mapped[str] = mapped_column(Text)
    seq: Mapped[int] = mapped_column(BigInteger)
    type: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


TRIGGERS = cast(Table, Trigger.__table__)
TRIGGER_FIRES = cast(Table, TriggerFire.__table__)
HOOK_SIGNATURES = cast(Table, HookSignature.__table__)
CHAIN_EVENTS = cast(Table, ChainEvent.__table__)
