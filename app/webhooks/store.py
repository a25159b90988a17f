"""Webhook rows, their deliveries and attempts: subscriptions with compare-and-set
updates, the delivery log, and the deliverers' queries (claim what is due under a lease,
settle an attempt fenced by its number, redeliver)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import DeliveryStatus
from app.core.streams import DELIVERIES_DUE
from app.events.store import NOTIFY_CHANNEL
from app.webhooks.models import WEBHOOK_DELIVERIES, WEBHOOK_DELIVERY_ATTEMPTS, WEBHOOKS
from app.webhooks.schemas import WebhookDeliveryAttemptRead, WebhookDeliveryRead, WebhookWithSecret

D = WEBHOOK_DELIVERIES
_PENDING = DeliveryStatus.PENDING.value


def _webhook(row: Any) -> WebhookWithSecret:
    return WebhookWithSecret.model_validate(row._mapping)


def _delivery(row: Any) -> WebhookDeliveryRead:
    values = dict(row._mapping)
    if values["status"] != _PENDING:
        values["next_attempt_at"] = None
    return WebhookDeliveryRead.model_validate(
        {k: v for k, v in values.items() if k in WebhookDeliveryRead.model_fields}
    )


# -- subscriptions -------------------------------------------------------------------------


async def insert_webhook(session: AsyncSession, values: dict[str, Any]) -> WebhookWithSecret:
    row = (await session.execute(insert(WEBHOOKS).values(**values).returning(*WEBHOOKS.c))).one()
    return _webhook(row)


async def get_webhook(
    session: AsyncSession, webhook_id: str, *, lock: bool = False
) -> WebhookWithSecret | None:
    stmt = select(WEBHOOKS).where(WEBHOOKS.c.id == webhook_id)
    if lock:
        stmt = stmt.with_for_update()
    row = (await session.execute(stmt)).first()
    return _webhook(row) if row else None


async def list_webhooks(
    session: AsyncSession, *, after_id: str | None, limit: int, filters: dict[str, Any]
) -> list[WebhookWithSecret]:
    stmt = select(WEBHOOKS).order_by(WEBHOOKS.c.id).limit(limit)
    for column, value in filters.items():
        stmt = stmt.where(WEBHOOKS.c[column] == value)
    if after_id is not None:
        stmt = stmt.where(WEBHOOKS.c.id > after_id)
    return [_webhook(r) for r in await session.execute(stmt)]


async def update_webhook(
    session: AsyncSession, webhook_id: str, *, read_version: int, values: dict[str, Any]
) -> WebhookWithSecret | None:
    """Compare-and-set on `version`; None when the row is gone or was changed."""
    row = (
        await session.execute(
            update(WEBHOOKS)
            .where(WEBHOOKS.c.id == webhook_id, WEBHOOKS.c.version == read_version)
            .values(**values, version=read_version + 1)
            .returning(*WEBHOOKS.c)
        )
    ).first()
    return _webhook(row) if row else None


async def delete_webhook(session: AsyncSession, webhook_id: str, *, read_version: int) -> bool:
    """Deletes it with its deliveries; False when it was changed or is gone."""
    stmt = delete(WEBHOOKS).where(WEBHOOKS.c.id == webhook_id, WEBHOOKS.c.version == read_version)
    return bool((await session.execute(stmt.returning(WEBHOOKS.c.id))).first())


# -- the delivery log ----------------------------------------------------------------------


async def list_deliveries(
    session: AsyncSession,
    webhook_id: str,
    *,
    before_id: str | None,
    limit: int,
    status: DeliveryStatus | None,
) -> list[WebhookDeliveryRead]:
    """A webhook's deliveries, newest first (ids sort by creation time)."""
    stmt = select(D).where(D.c.webhook_id == webhook_id).order_by(D.c.id.desc()).limit(limit)
    if status is not None:
        stmt = stmt.where(D.c.status == status.value)
    if before_id is not None:
        stmt = stmt.where(D.c.id < before_id)
    return [_delivery(r) for r in await session.execute(stmt)]


async def get_delivery(
    session: AsyncSession, webhook_id: str, delivery_id: str, *, lock: bool = False
) -> WebhookDeliveryRead | None:
    stmt = select(D).where(D.c.id == delivery_id, D.c.webhook_id == webhook_id)
    if lock:
        stmt = stmt.with_for_update()
    row = (await session.execute(stmt)).first()
    return _delivery(row) if row else None


async def attempts_of(session: AsyncSession, delivery_id: str) -> list[WebhookDeliveryAttemptRead]:
    A = WEBHOOK_DELIVERY_ATTEMPTS
    columns = [A.c[name] for name in WebhookDeliveryAttemptRead.model_fields]
    rows = await session.execute(
        select(*columns).where(A.c.delivery_id == delivery_id).order_by(A.c.attempt)
    )
    return [WebhookDeliveryAttemptRead.model_validate(r._mapping) for r in rows]


async def redeliver(session: AsyncSession, delivery_id: str, now: datetime) -> WebhookDeliveryRead:
    """A settled delivery (locked by the caller) goes back to pending, due now, with a
    fresh attempt budget; the deliverers of every process are woken at commit."""
    row = (
        await session.execute(
            update(D)
            .where(D.c.id == delivery_id)
            .values(
                status=_PENDING,
                attempts_before_redeliver=D.c.attempts,
                next_attempt_at=now,
                locked_until=None,
                delivered_at=None,
            )
            .returning(*D.c)
        )
    ).one()
    await notify_due(session)
    return _delivery(row)


async def notify_due(session: AsyncSession) -> None:
    """Wake every process's deliverer at commit (as the outbox trigger does)."""
    await session.execute(
        text("SELECT pg_notify(:channel, :payload)"),
        {"channel": NOTIFY_CHANNEL, "payload": f'{{"stream": "{DELIVERIES_DUE}"}}'},
    )


# -- the deliverers' queries ---------------------------------------------------------------


@dataclass(frozen=True)
class Claimed:
    """A delivery a deliverer holds for one attempt, with what it needs to send it."""

    id: str
    webhook_id: str
    event_type: str
    payload: dict[str, Any]
    attempt: int  # the attempt's number, and the fence of its outcome
    attempts_before_redeliver: int
    url: str
    secret: str

    @property
    def round_attempt(self) -> int:
        """The attempt's number since the delivery's latest redeliver (1 for the first)."""
        return self.attempt - self.attempts_before_redeliver


# Due deliveries of enabled webhooks, oldest due first, taken with SKIP LOCKED so that
# deliverers in several processes take different ones; each gets its attempt counted and
# is held (`next_attempt_at` moved to the end of the lease) in the same statement.
_CLAIM = text(
    """
    WITH due AS (
        SELECT d.id FROM webhook_deliveries AS d JOIN webhooks AS w ON w.id = d.webhook_id
        WHERE d.status = 'pending' AND d.next_attempt_at <= :now AND w.enabled
        ORDER BY d.next_attempt_at
        LIMIT :limit
        FOR UPDATE OF d SKIP LOCKED
    )
    UPDATE webhook_deliveries AS d
    SET attempts = d.attempts + 1, next_attempt_at = :lease_end, locked_until = :lease_end
    FROM due, webhooks AS w
    WHERE d.id = due.id AND w.id = d.webhook_id
    RETURNING d.id, d.webhook_id, d.event_type, d.payload, d.attempts,
              d.attempts_before_redeliver, w.url, w.secret
    """
)


async def claim_due(
    session: AsyncSession, now: datetime, lease_end: datetime, *, limit: int
) -> list[Claimed]:
    rows = await session.execute(_CLAIM, {"now": now, "lease_end": lease_end, "limit": limit})
    claimed = [
        Claimed(
            r.id,
            r.webhook_id,
            r.event_type,
            r.payload,
            r.attempts,
            r.attempts_before_redeliver,
            r.url,
            r.secret,
        )
        for r in rows
    ]
    return sorted(claimed, key=lambda c: c.id)


async def prune_settled(session: AsyncSession, *, before_id: str, limit: int) -> int:
    """Delete up to `limit` settled deliveries (succeeded or dead-lettered) made before
    `before_id` (an `id_floor`), oldest first, with their attempts; the number deleted."""
    deleted = await session.execute(
        text(
            """
            DELETE FROM webhook_deliveries WHERE id IN (
                SELECT id FROM webhook_deliveries
                WHERE id < :before AND status IN ('succeeded', 'dead_letter')
                ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED)
            RETURNING id
            """
        ),
        {"before": before_id, "limit": limit},
    )
    return len(deleted.all())


async def next_due(session: AsyncSession) -> datetime | None:
    """When the earliest pending delivery is due (or its attempt's lease ends)."""
    due: datetime | None = await session.scalar(
        select(func.min(D.c.next_attempt_at)).where(D.c.status == _PENDING)
    )
    return due


async def settle_attempt(
    session: AsyncSession, claimed: Claimed, values: dict[str, Any]
) -> WebhookDeliveryRead | None:
    """Record an attempt's outcome on the delivery, fenced: None when the attempt is no
    longer the delivery's latest (its lease ran out and another deliverer took it, or a
    person redelivered it) or the delivery is gone."""
    row = (
        await session.execute(
            update(D)
            .where(D.c.id == claimed.id, D.c.attempts == claimed.attempt, D.c.status == _PENDING)
            .values(**values, locked_until=None)
            .returning(*D.c)
        )
    ).first()
    return _delivery(row) if row else None


async def insert_attempt(session: AsyncSession, values: dict[str, Any]) -> None:
    await session.execute(insert(WEBHOOK_DELIVERY_ATTEMPTS).values(**values))


async def release(session: AsyncSession, claimed: Claimed, now: datetime) -> None:
    """Give back an attempt cut short (a shutdown): due now, its number not used."""
    await session.execute(
        update(D)
        .where(D.c.id == claimed.id, D.c.attempts == claimed.attempt, D.c.status == _PENDING)
        .values(attempts=D.c.attempts - 1, next_attempt_at=now, locked_until=None)
    )
