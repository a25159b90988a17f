"""`Idempotency-Key` for creates that write one row in one transaction (agents, workflow
definitions): the key is looked up, and later stored, in the transaction of the create.

The first response is what a repeat gets, as for tasks: the key keeps the created resource
as it was returned (`KeyRecord.response`), so a repeat answers the same body even after
the resource was changed or deleted. Two requests with one key at once are serialised on
an advisory lock of the key, taken before the lookup: the second waits for the first to
commit, then finds its key and replays it (instead of failing on the key's primary key).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import IdempotencyKeyReused
from app.store import idempotency


@dataclass(frozen=True)
class ClientKey:
    """A client's key for one create, with the hash of the request it came with."""

    scope: str
    key: str
    request_hash: str


async def replay(
    session: AsyncSession, key: ClientKey | None, live_since: datetime
) -> dict[str, Any] | None:
    """The first response to this key within the window, or None when the request is new.
    Holds the key's lock until the transaction ends, so call it in the create's own."""
    if key is None:
        return None
    await idempotency.lock_key(session, key.scope, key.key)
    found = await idempotency.find_keys(session, key.scope, [key.key], live_since=live_since)
    record = found.get(key.key)
    if record is None:
        return None
    if record.request_hash != key.request_hash:
        raise IdempotencyKeyReused()
    return record.response


async def remember(
    session: AsyncSession,
    key: ClientKey | None,
    resource_id: str,
    response: dict[str, Any],
    now: datetime,
    live_since: datetime,
) -> None:
    """Store the key with the response it got (replacing a row of it that has expired)."""
    if key is None:
        return
    record = idempotency.KeyRecord(key.scope, key.key, key.request_hash, resource_id, response)
    await idempotency.insert_keys(session, [record], now, live_since=live_since)
