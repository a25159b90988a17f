"""Keyset pagination: opaque cursors and pages."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Protocol, TypeVar

from app.core.errors import ValidationFailed
from app.schemas.common import Page


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_HasId)


def page(rows: Sequence[T], limit: int) -> Page[T]:
    """One page from `limit + 1` rows read in id order: the extra row says there is more."""
    next_cursor = encode_cursor(rows[limit - 1].id) if len(rows) > limit else None
    return Page(items=list(rows[:limit]), next_cursor=next_cursor)


def present(**filters: object) -> dict[str, str]:
    """The filters a client gave, as column -> text."""
    return {name: str(value) for name, value in filters.items() if value is not None}


def encode_cursor(after_id: str) -> str:
    raw = json.dumps({"after": after_id}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        after = json.loads(raw)["after"]
    except (binascii.Error, ValueError, KeyError, TypeError):
        after = None
    # The server only issues ids in printable ASCII; anything else (a NUL, a lone surrogate)
    # is forged and would reach Postgres, which refuses it as text (a 500).
    if not isinstance(after, str) or not (after.isascii() and after.isprintable()):
        raise ValidationFailed.field("query.cursor", "is not a cursor this server issued")
    return after
