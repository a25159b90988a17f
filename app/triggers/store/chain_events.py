"""The chains' outbox (`chain_events`, filled by the database from `events`): take a batch
to relay, and delete it once its chains have fired."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.vocabulary import TriggerKind
from app.triggers.models import CHAIN_EVENTS, TRIGGERS


@dataclass(frozen=True)
class ChainSourceEvent:
    id: int
    stream: str
    seq: int
    type: str
    data: dict[str, Any]


@dataclass(frozen=True)
class EnabledChain:
    id: str
    config: dict[str, Any]


async def take(session: AsyncSession, *, limit: int) -> list[ChainSourceEvent]:
    """The oldest events not being relayed by another process (locked until commit)."""
    rows = await session.execute(
        select(CHAIN_EVENTS.c.id, CHAIN_EVENTS.c.stream, CHAIN_EVENTS.c.seq, CHAIN_EVENTS.c.type)
        .add_columns(CHAIN_EVENTS.c.data)
        .order_by(CHAIN_EVENTS.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return [ChainSourceEvent(r.id, r.stream, r.seq, r.type, r.data) for r in rows]


async def enabled_chains(session: AsyncSession) -> list[EnabledChain]:
    rows = await session.execute(
        select(TRIGGERS.c.id, TRIGGERS.c.config).where(
            TRIGGERS.c.kind == TriggerKind.CHAIN, TRIGGERS.c.enabled
        )
    )
    return [EnabledChain(r.id, r.config) for r in rows]


async def done(session: AsyncSession, ids: Sequence[int]) -> None:
    if ids:
        await session.execute(delete(CHAIN_EVENTS).where(CHAIN_EVENTS.c.id.in_(ids)))
