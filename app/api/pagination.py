"""Opaque cursors for keyset pagination."""

from __future__ import annotations

import base64
import binascii
import json

from app.errors import ValidationFailed


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
    if not isinstance(after, str):
        raise ValidationFailed.field("query.cursor", "is not a cursor this server issued")
    return after
