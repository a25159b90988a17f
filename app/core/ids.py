"""Opaque, time-ordered identifiers: `<prefix>_<ULID>` so that ids sort by creation time."""

from __future__ import annotations

import base64
import os
import time
from datetime import datetime

# RFC 4648 base32 digits, mapped in order onto Crockford's lower-case alphabet, so that the
# text sorts like the number it encodes.
_TO_CROCKFORD = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", "0123456789abcdefghjkmnpqrstvwxyz"
)


def new_id(prefix: str) -> str:
    """48 bits of milliseconds then 80 random bits, as 26 base32 characters."""
    millis = time.time_ns() // 1_000_000
    return _encode(prefix, (millis << 80) | int.from_bytes(os.urandom(10), "big"))


def id_floor(prefix: str, at: datetime) -> str:
    """The smallest id `new_id(prefix)` could make at `at`: every id made before `at`
    sorts below it, so `id < id_floor(...)` is a time bound the primary key can serve."""
    millis = int(at.timestamp() * 1_000)
    return _encode(prefix, millis << 80)


def _encode(prefix: str, value: int) -> str:
    # 26 digits hold 130 bits: two zero bits, then the 128. Shifted into 160 bits (20 bytes)
    # they encode without padding, and the first 26 digits are the ones we want.
    digits = base64.b32encode((value << 30).to_bytes(20, "big")).decode()[:26]
    return f"{prefix}_{digits.translate(_TO_CROCKFORD)}"
