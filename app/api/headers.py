"""Request headers shared by the routers: Idempotency-Key, If-Match, ETag."""

from __future__ import annotations

from typing import Annotated

from fastapi import Header

from app.errors import ValidationFailed

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
    Header(alias="If-Match", description='The version you last read, as its ETag (`"3"`).'),
]


def etag(version: int) -> str:
    return f'"{version}"'


def expected_version(if_match: str | None) -> int | None:
    """The version an `If-Match` names; None for a missing header or `*`."""
    if if_match is None or if_match.strip() == "*":
        return None
    value = if_match.strip().removeprefix("W/").strip('"')
    if not value.isdigit() or int(value) < 1:
        raise ValidationFailed.field("header.If-Match", 'must be a version such as "3"')
    return int(value)
