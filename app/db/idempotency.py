"""Idempotency keys: the request a key first answered and the response it got.

A key is remembered for a window (`IdempotencySettings.retention_s`) or, when a run's
tool call made it (`run_id`), while that run may run again:
- a client's key (no `run_id`) created before `live_since` (the caller's now minus the
  window) is expired: lookups do not find it, an insert of the same key replaces it, and
  the sweep deletes it (`delete_expired`);
- a key with a `run_id` never expires by age: the run re-runs a call cut short whenever
  it runs again, however late (a timed-out run resumed by hand, a dead-lettered one
  retried), and must find what the first attempt made. The sweep deletes it once it is
  past the window and its run can never run again (`delete_settled_run_keys`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Select, delete, exists, insert, select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import RUN_TERMINAL
from app.events.models import IDEMPOTENCY_KEYS, IdempotencyKey
from app.runs.models import Run

DEFAULT_RETENTION = timedelta(hours=24)


@dataclass(frozen=True)
class KeyRecord:
    """`run_id`: the run whose tool call made the key (it is kept while that run may run
    again); None for a client's key."""

    scope: str
    key: str
    request_hash: str
    resource_id: str
    response: dict[str, Any]
    run_id: str | None = None


def request_hash(body: Any) -> str:
    """A stable digest of a JSON-able request body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _expired(live_since: datetime) -> ColumnElement[bool]:
    """Forgotten by lookups: a client's key older than the window. A run's key is not."""
    return IdempotencyKey.run_id.is_(None) & (IdempotencyKey.created_at < live_since)


async def lock_key(session: AsyncSession, scope: str, key: str) -> None:
    """Serialise the transactions that look a key up and may store it: a second request
    with the same key waits for the first to commit, then finds the key and replays it,
    instead of failing on its primary key. Two int4 halves: a lock space apart from the
    one-argument locks of lanes."""
    await session.execute(
        text("SELECT pg_advisory_xact_lock(hashtext(:scope), hashtext(:key))"),
        {"scope": scope, "key": key},
    )


async def find_keys(
    session: AsyncSession,
    scope: str,
    keys: Iterable[str],
    *,
    live_since: datetime | None = None,
) -> dict[str, KeyRecord]:
    """The live records of `keys` in `scope`: runs' keys, and clients' keys created at or
    after `live_since` (all of them without it). An expired key is not found even before
    the sweep deletes it."""
    found = await find_scoped_keys(session, ((scope, k) for k in keys), live_since=live_since)
    return {key: record for (_, key), record in found.items()}


async def find_scoped_keys(
    session: AsyncSession,
    keys: Iterable[tuple[str, str]],
    *,
    live_since: datetime | None = None,
) -> dict[tuple[str, str], KeyRecord]:
    """`find_keys` for (scope, key) pairs of several scopes, in one query."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    query = select(IdempotencyKey).where(
        tuple_(IdempotencyKey.scope, IdempotencyKey.key).in_(wanted)
    )
    if live_since is not None:
        query = query.where(~_expired(live_since))
    rows = await session.scalars(query)
    return {
        (r.scope, r.key): KeyRecord(
            r.scope, r.key, r.request_hash, r.resource_id, r.response, r.run_id
        )
        for r in rows
    }


async def insert_keys(
    session: AsyncSession,
    records: Iterable[KeyRecord],
    now: datetime,
    *,
    live_since: datetime | None = None,
) -> None:
    """Remember `records` as created `now`. With `live_since`, a client's row of the same
    key that expired before it is deleted first (the key is new again); a live one stays,
    and the insert fails on the primary key as it always did when another transaction
    committed the same key first."""
    records = list(records)
    if not records:
        return
    if live_since is not None:
        await session.execute(
            delete(IdempotencyKey).where(
                tuple_(IdempotencyKey.scope, IdempotencyKey.key).in_(
                    [(r.scope, r.key) for r in records]
                ),
                _expired(live_since),
            )
        )
    rows = [
        {
            "scope": r.scope,
            "key": r.key,
            "request_hash": r.request_hash,
            "resource_id": r.resource_id,
            "response": r.response,
            "run_id": r.run_id,
            "created_at": now,
        }
        for r in records
    ]
    await session.execute(insert(IDEMPOTENCY_KEYS), rows)


async def delete_expired(session: AsyncSession, live_since: datetime, *, limit: int) -> int:
    """Delete up to `limit` clients' keys created before `live_since`, oldest first; rows
    another transaction holds are skipped. The number deleted."""
    expired = (
        select(IdempotencyKey.scope, IdempotencyKey.key)
        .where(_expired(live_since))
        .order_by(IdempotencyKey.created_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return await _delete(session, expired)


async def delete_settled_run_keys(
    session: AsyncSession, live_since: datetime, *, limit: int
) -> int:
    """Delete up to `limit` keys made by runs' tool calls (of every scope), created before
    `live_since`, whose run can never run again (completed or cancelled), oldest first;
    rows another transaction holds are skipped. The number deleted."""
    may_run_again = exists().where(
        Run.id == IdempotencyKey.run_id,
        Run.status.not_in(sorted(s.value for s in RUN_TERMINAL)),
    )
    settled = (
        select(IdempotencyKey.scope, IdempotencyKey.key)
        .where(
            IdempotencyKey.run_id.is_not(None),
            IdempotencyKey.created_at < live_since,
            ~may_run_again,
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
