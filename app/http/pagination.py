"""Keyset pagination: opaque cursors and pages.

A cursor names the last id of the page before, as the hex digits of its ASCII bytes, each
byte a visible character. Every string of that form is a cursor (a position in the id
order), so the schema's pattern says exactly which cursors are accepted; an id the server
never issued is just a position with nothing, or something, after it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Protocol, TypeVar

from fastapi import Query

from app.core.errors import ValidationFailed
from app.core.shapes import Page

MAX_CURSOR_CHARS = 500
# Pairs of hex digits, each pair a byte from 0x20 (space) to 0x7e (`~`).
CURSOR_PATTERN = rf"^(?:[2-6][0-9a-f]|7[0-9a-e]){{1,{MAX_CURSOR_CHARS // 2}}}$"
_CURSOR = re.compile(CURSOR_PATTERN)

CursorQuery = Annotated[
    str | None,
    Query(
        max_length=MAX_CURSOR_CHARS,
        description="Where the page starts: the `next_cursor` of the page before.",
        json_schema_extra={"pattern": CURSOR_PATTERN},
    ),
]


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_HasId)


def page(rows: Sequence[T], limit: int) -> Page[T]:
    """One page from `limit + 1` rows read in id order (either way): the extra row says
    there is more. The next page starts after its last id, in the same order."""
    next_cursor = encode_cursor(rows[limit - 1].id) if len(rows) > limit else None
    return Page(items=list(rows[:limit]), next_cursor=next_cursor)


def present(**filters: object) -> dict[str, str]:
    """The filters a client gave, as column -> text."""
    return {name: str(value) for name, value in filters.items() if value is not None}


def encode_cursor(after_id: str) -> str:
    return after_id.encode("ascii").hex()  # ids are visible ASCII


def decode_cursor(cursor: str | None) -> str | None:
    """The id a cursor names. Only visible ASCII gets through: a NUL or a lone surrogate
    would reach Postgres, which refuses it as text (a 500)."""
    if cursor is None:
        return None
    if not _CURSOR.fullmatch(cursor):
        raise ValidationFailed.field(
            "query.cursor", "is not a cursor (pass the `next_cursor` of the page before)"
        )
    return bytes.fromhex(cursor).decode("ascii")
