"""Idempotency keys: the request a key first answered and the response it got."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import IDEMPOTENCY_KEYS, IdempotencyKey


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


async def find_keys(session: AsyncSession, scope: str, keys: Iterable[str]) -> dict[str, KeyRecord]:
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    rows = await session.scalars(
        select(IdempotencyKey).where(
            tuple_(IdempotencyKey.scope, IdempotencyKey.key).in_([(scope, k) for k in wanted])
        )
    )
    return {
        r.key: KeyRecord(r.scope, r.key, r.request_hash, r.resource_id, r.response) for r in rows
    }


async def insert_keys(session: AsyncSession, records: Iterable[KeyRecord], now: datetime) -> None:
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
    if rows:
        await session.execute(insert(IDEMPOTENCY_KEYS), rows)
