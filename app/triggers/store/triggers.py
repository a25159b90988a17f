"""Trigger rows, their fires and the webhook signatures they accepted."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.triggers.models import HOOK_SIGNATURES, TRIGGER_FIRES, TRIGGERS
from app.triggers.schemas import FireRead, TriggerRead


def _read(row: Any, *, with_secret: bool = False) -> TriggerRead:
    values = dict(row._mapping)
    if not with_secret:
        values["secret"] = None
    return TriggerRead.model_validate(values)


async def insert_trigger(session: AsyncSession, values: dict[str, Any]) -> TriggerRead:
    row = (await session.execute(TRIGGERS.insert().values(**values).returning(*TRIGGERS.c))).one()
    return _read(row, with_secret=True)


async def get_trigger(
    session: AsyncSession, trigger_id: str, *, lock: bool = False, with_secret: bool = False
) -> TriggerRead | None:
    """The trigger (`lock`: its row locked until the transaction ends); its `secret` only
    when asked."""
    stmt = select(TRIGGERS).where(TRIGGERS.c.id == trigger_id)
    if lock:
        stmt = stmt.with_for_update()
    row = (await session.execute(stmt)).first()
    return _read(row, with_secret=with_secret) if row else None


async def list_triggers(
    session: AsyncSession, *, after_id: str | None, limit: int, filters: dict[str, Any]
) -> list[TriggerRead]:
    """Oldest first (ids sort by creation), from just past `after_id`."""
    stmt = select(TRIGGERS).order_by(TRIGGERS.c.id).limit(limit)
    for column, value in filters.items():
        stmt = stmt.where(TRIGGERS.c[column] == value)
    if after_id is not None:
        stmt = stmt.where(TRIGGERS.c.id > after_id)
    return [_read(r) for r in await session.execute(stmt)]


async def update_trigger(
    session: AsyncSession,
    trigger_id: str,
    *,
    read_version: int,
    values: dict[str, Any],
    now: datetime,
) -> TriggerRead | None:
    """Compare-and-set on `version`; None when the row is gone or was changed. The secret
    comes back only when `values` sets it."""
    row = (
        await session.execute(
            update(TRIGGERS)
            .where(TRIGGERS.c.id == trigger_id, TRIGGERS.c.version == read_version)
            .values(**values, version=read_version + 1, updated_at=now)
            .returning(*TRIGGERS.c)
        )
    ).first()
    return _read(row, with_secret="secret" in values) if row else None


async def delete_trigger(session: AsyncSession, trigger_id: str, *, read_version: int) -> bool:
    """Its fires and accepted signatures go with it (ON DELETE CASCADE)."""
    stmt = delete(TRIGGERS).where(TRIGGERS.c.id == trigger_id, TRIGGERS.c.version == read_version)
    return bool((await session.execute(stmt.returning(TRIGGERS.c.id))).first())


async def lock_chains(session: AsyncSession) -> None:
    """Serialise the saves of chain triggers until the transaction ends (the graph check
    reads every enabled chain)."""
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtext('triggers:chains'))"))


async def mark_fired(session: AsyncSession, trigger_id: str, fired_at: datetime) -> None:
    """`last_fired_at` moves forward only; the version stays (a fire is not an edit, and a
    client's `If-Match` must not fail because the trigger fired)."""
    await session.execute(
        update(TRIGGERS)
        .where(TRIGGERS.c.id == trigger_id)
        .values(last_fired_at=func.greatest(TRIGGERS.c.last_fired_at, fired_at))
    )


# -- fires -----------------------------------------------------------------------------


async def lock_occasion(session: AsyncSession, trigger_id: str, fire_key: str) -> None:
    """Serialise the transactions that fire one occasion of one trigger: the second waits
    for the first to commit, then finds its fire. A lock space of its own (two int4 halves
    from another pair of texts than the idempotency keys')."""
    await session.execute(
        text("SELECT pg_advisory_xact_lock(hashtext(:space), hashtext(:occasion))"),
        {"space": f"trigger:{trigger_id}", "occasion": fire_key},
    )


async def get_fire(session: AsyncSession, trigger_id: str, fire_key: str) -> FireRow | None:
    row = (
        await session.execute(
            select(TRIGGER_FIRES).where(
                TRIGGER_FIRES.c.trigger_id == trigger_id, TRIGGER_FIRES.c.fire_key == fire_key
            )
        )
    ).first()
    return FireRow(FireRead.model_validate(row), row.response) if row else None


async def insert_fire(session: AsyncSession, values: dict[str, Any]) -> FireRead:
    row = (
        await session.execute(TRIGGER_FIRES.insert().values(**values).returning(*TRIGGER_FIRES.c))
    ).one()
    return FireRead.model_validate(row)


async def last_started_fire(session: AsyncSession, trigger_id: str) -> FireRead | None:
    """The trigger's latest fire that started a run or an execution."""
    row = (
        await session.execute(
            select(TRIGGER_FIRES)
            .where(TRIGGER_FIRES.c.trigger_id == trigger_id, TRIGGER_FIRES.c.status == "started")
            .order_by(TRIGGER_FIRES.c.fired_at.desc(), TRIGGER_FIRES.c.id.desc())
            .limit(1)
        )
    ).first()
    return FireRead.model_validate(row) if row else None


async def list_fires(
    session: AsyncSession, trigger_id: str, *, before_id: str | None, limit: int
) -> list[FireRead]:
    """Newest first (fire ids sort by the time they were made), from just before
    `before_id`."""
    stmt = (
        select(TRIGGER_FIRES)
        .where(TRIGGER_FIRES.c.trigger_id == trigger_id)
        .order_by(TRIGGER_FIRES.c.id.desc())
        .limit(limit)
    )
    if before_id is not None:
        stmt = stmt.where(TRIGGER_FIRES.c.id < before_id)
    return [FireRead.model_validate(r) for r in await session.execute(stmt)]


async def fires_of_source(session: AsyncSession, source_id: str, *, limit: int) -> list[FireRead]:
    """The chain fires a run's or an execution's end made, oldest first."""
    stmt = (
        select(TRIGGER_FIRES)
        .where(TRIGGER_FIRES.c.source_id == source_id)
        .order_by(TRIGGER_FIRES.c.id)
        .limit(limit)
    )
    return [FireRead.model_validate(r) for r in await session.execute(stmt)]


async def prune_fires(session: AsyncSession, *, before_id: str, limit: int) -> int:
    """Delete up to `limit` fires made before `before_id` (an `id_floor`), oldest first;
    the number deleted."""
    deleted = await session.execute(
        text(
            """
            DELETE FROM trigger_fires WHERE id IN (
                SELECT id FROM trigger_fires WHERE id < :before
                ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED)
            RETURNING id
            """
        ),
        {"before": before_id, "limit": limit},
    )
    return len(deleted.all())


@dataclass(frozen=True)
class FireRow:
    """A fire and the answer its webhook delivery was given (None for other kinds)."""

    fire: FireRead
    response: dict[str, Any] | None


# -- accepted signatures ---------------------------------------------------------------


async def accept_signature(
    session: AsyncSession,
    trigger_id: str,
    signature: str,
    *,
    now: datetime,
    forget_before: datetime,
) -> bool:
    """Record a signature as accepted; False when it was already (a replay). The trigger's
    signatures accepted before `forget_before` are deleted first: their timestamps can no
    longer pass the tolerance check, so they need no remembering."""
    await session.execute(
        delete(HOOK_SIGNATURES).where(
            HOOK_SIGNATURES.c.trigger_id == trigger_id, HOOK_SIGNATURES.c.seen_at < forget_before
        )
    )
    inserted = await session.execute(
        insert(HOOK_SIGNATURES)
        .values(trigger_id=trigger_id, signature=signature, seen_at=now)
        .on_conflict_do_nothing()
        .returning(HOOK_SIGNATURES.c.signature)
    )
    return inserted.first() is not None
