"""Idempotency keys: the request a key first answered and the response it got.

A key is remembered for a window (`IdempotencySettings.retention_s`): callers pass
`live_since` (their clock's now minus the window), and a key created before it is
expired: lookups do not find it, an insert of the same key replaces it, and the sweep
deletes it. Keys used without `live_since` never expire by age (spawned child runs: see
`delete_settled_spawn_keys`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, delete, exists, insert, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.models import IDEMPOTENCY_KEYS, IdempotencyKey, Run
from app.states import RUN_TERMINAL

DEFAULT_RETENTION = timedelta(hours=24)


@dataclass(frozen=True)
class KeyRecord:
    scope: str
    key: str
    request_hash: str
    resource_id: str
    response: dict[str, Any]


def request_hash(body: Any) -> str:
    """A stable digest of a JSON-able request body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


async def find_keys(
    session: AsyncSession,
    scope: str,
    keys: Iterable[str],
    *,
    live_since: datetime | None = None,
) -> dict[str, KeyRecord]:
    """The live records of `keys`: those created at or after `live_since` (all of them
    without it). An expired key is not found even before the sweep deletes it."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    query = select(IdempotencyKey).where(
        tuple_(IdempotencyKey.scope, IdempotencyKey.key).in_([(scope, k) for k in wanted])
    )
    if live_since is not None:
        query = query.where(IdempotencyKey.created_at >= live_since)
    rows = await session.scalars(query)
    return {
        r.key: KeyRecord(r.scope, r.key, r.request_hash, r.resource_id, r.response) for r in rows
    }


async def insert_keys(
    session: AsyncSession,
    records: Iterable[KeyRecord],
    now: datetime,
    *,
    live_since: datetime | None = None,
) -> None:
    """Remember `records` as created `now`. With `live_since`, a row of the same key that
    expired before it is deleted first (the key is new again); a live one stays, and the
    insert fails on the primary key as it always did when another transaction committed
    the same key first."""
    records = list(records)
    if not records:
        return
    if live_since is not None:
        await session.execute(
            delete(IdempotencyKey).where(
                tuple_(IdempotencyKey.scope, IdempotencyKey.key).in_(
                    [(r.scope, r.key) for r in records]
                ),
                IdempotencyKey.created_at < live_since,
            )
        )
    rows = [
        {
            "scope": r.scope,
            "key": r.key,
            "request_hash": r.request_hash,
            "resource_id": r.resource_id,
            "response": r.response,
            "created_at": now,
        }
        for r in records
    ]
    await session.execute(insert(IDEMPOTENCY_KEYS), rows)


async def delete_expired(
    session: AsyncSession,
    live_since: datetime,
    *,
    limit: int,
    spare_scopes: Collection[str] = (),
) -> int:
    """Delete up to `limit` keys created before `live_since`, oldest first, outside
    `spare_scopes`; rows another transaction holds are skipped. The number deleted."""
    expired = (
        select(IdempotencyKey.scope, IdempotencyKey.key)
        .where(IdempotencyKey.created_at < live_since)
        .order_by(IdempotencyKey.created_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if spare_scopes:
        expired = expired.where(IdempotencyKey.scope.not_in(sorted(spare_scopes)))
    return await _delete(session, expired)


async def delete_settled_spawn_keys(
    session: AsyncSession, scope: str, live_since: datetime, *, limit: int
) -> int:
    """Delete up to `limit` keys of `scope` (child runs, keyed by the parent's tool call)
    created before `live_since` whose parent run can never run again (completed or
    cancelled): only a parent that runs again re-runs a spawn, however late (a timed-out
    run resumed by hand, a dead-lettered one retried). The number deleted."""
    child, parent = aliased(Run), aliased(Run)
    kept_by_parent = exists().where(
        child.id == IdempotencyKey.resource_id,
        parent.id == child.parent_run_id,
        parent.status.not_in(sorted(s.value for s in RUN_TERMINAL)),
    )
    settled = (
        select(IdempotencyKey.scope, IdempotencyKey.key)
        .where(
            IdempotencyKey.scope == scope,
            IdempotencyKey.created_at < live_since,
            ~kept_by_parent,
        )
        .order_by(IdempotencyKey.created_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return await _delete(session, settled)


async def _delete(session: AsyncSession, chosen: Select[str, str]) -> int:
    stmt = (
        delete(IdempotencyKey)
        .where(tuple_(IdempotencyKey.scope, IdempotencyKey.key).in_(chosen))
        .returning(IdempotencyKey.key)
    )
    return len((await session.execute(stmt)).all())
