"""Creates under an `Idempotency-Key`: agents, workflow definitions, runs (a client's and a
parent's spawned children) and workflow activations.

Inside the create's own transaction, `keyed_create` takes the key's advisory lock, then
looks the key up. Of two requests with one key at once, the second therefore waits for
the first to commit, then finds its key and replays it, instead of failing on the key's
primary key. A live key that answered another request (another hash) is refused with
`IdempotencyKeyReused`; one that answered this request is the replay. Otherwise the caller
creates, then `remember`s the key in the same transaction, so the resource and its key
commit together or not at all.

What a replay answers is the caller's choice: the response stored with the key (agents and
definitions answer as the first create did, even after the resource changed or went) or
the resource as it is now (runs, executions: their key stores no response).

Without a key, `keyed_create` touches nothing, finds nothing and remembers nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import IdempotencyKeyReused
from app.db import idempotency
from app.db.idempotency import KeyRecord


@dataclass(frozen=True)
class CreateKey:
    """One create's key: `scope` names the kind of create (a key spelled the same in
    another scope is another key); `run_id` is the run whose tool call made the key, which
    then lasts while that run may run again, not for the clients' window."""

    scope: str
    key: str
    request_hash: str
    run_id: str | None = None

    @classmethod
    def of(
        cls, scope: str, key: str | None, request_hash: str | None, *, run_id: str | None = None
    ) -> CreateKey | None:
        """The key of a request, None when it came without one."""
        return cls(scope, key, request_hash or "", run_id) if key else None

    def replays(self, found: KeyRecord | None) -> KeyRecord | None:
        """`found` (this key's live record) when it answered this same request; None when
        there is none. A key first used for another request is refused."""
        if found is None:
            return None
        if found.request_hash != self.request_hash:
            raise IdempotencyKeyReused()
        return found

    def record(self, resource_id: str, response: dict[str, Any]) -> KeyRecord:
        return KeyRecord(
            self.scope, self.key, self.request_hash, resource_id, response, run_id=self.run_id
        )


@dataclass
class KeyedCreate:
    """One create in progress: `replay` is the key's first answer when this request is a
    repeat; else the caller creates and calls `remember`."""

    session: AsyncSession
    key: CreateKey | None
    now: datetime
    live_since: datetime
    replay: KeyRecord | None = field(default=None)

    async def remember(self, resource_id: str, response: dict[str, Any] | None = None) -> None:
        """Store the key, naming what the create made and the response a repeat gets
        (none when repeats read the resource as it is); a row of the key that expired is
        replaced."""
        if self.key is None:
            return
        record = self.key.record(resource_id, response or {})
        await idempotency.insert_keys(self.session, [record], self.now, live_since=self.live_since)


async def keyed_create(
    session: AsyncSession, key: CreateKey | None, *, now: datetime, retention: timedelta
) -> KeyedCreate:
    """Start a create in the caller's transaction: lock the key until that transaction
    ends, and find its first answer if a client's key is younger than `retention` or a
    run's key is still kept (see `app.db.idempotency`)."""
    create = KeyedCreate(session, key, now, now - retention)
    if key is not None:
        await idempotency.lock_key(session, key.scope, key.key)
        found = await idempotency.find_keys(
            session, key.scope, [key.key], live_since=create.live_since
        )
        create.replay = key.replays(found.get(key.key))
    return create
