"""Request headers shared by the routers: Idempotency-Key, If-Match, ETag."""

from __future__ import annotations

from typing import Annotated

from fastapi import Header

from app.core.bounds import VERSION_MAX, decimal_pattern
from app.core.errors import ValidationFailed

# What the schema promises `If-Match` takes: a version as its ETag (`"3"`, or weak `W/"3"`),
# the bare number, or `*`. (The server also forgives surrounding spaces and leading zeros.)
_VERSION = decimal_pattern(1, VERSION_MAX)
IF_MATCH_PATTERN = rf'^(?:\*|(?:W/)?"{_VERSION}"|{_VERSION})$'

IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=255,
        description="Repeat a create safely: the same key and body return the first result.",
    ),
]
IfMatchHeader = Annotated[
    str | None,
    Header(
        alias="If-Match",
        description=f'The version you last read, as its ETag (`"3"`), from 1 to {VERSION_MAX}; '
        "`*` matches any version. Anything else is a 422 naming the header.",
        json_schema_extra={"pattern": IF_MATCH_PATTERN},
    ),
]


def etag(version: int) -> str:
    return f'"{version}"'


def decimal(text: str, maximum: int) -> int | None:
    """A non-negative integer written in ASCII digits, at most `maximum`; None otherwise.

    `str.isdigit()` alone is not enough: it accepts digits `int()` refuses ('²') or reads
    ('٣'), and `int()` refuses strings over 4,300 digits; both were 500s. Leading zeros are
    dropped before the length check so that only a bounded string reaches `int()`."""
    if not (text.isascii() and text.isdigit()):
        return None
    significant = text.lstrip("0") or "0"
    if len(significant) > len(str(maximum)):
        return None
    value = int(significant)
    return value if value <= maximum else None


def expected_version(if_match: str | None) -> int | None:
    """The version an `If-Match` names; None for a missing header or `*`."""
    if if_match is None or if_match.strip() == "*":
        return None
    value = decimal(if_match.strip().removeprefix("W/").strip('"'), VERSION_MAX)
    if value is None or value < 1:
        raise ValidationFailed.field(
            "header.If-Match", f'must be a version such as "3" (1 to {VERSION_MAX})'
        )
    return value
