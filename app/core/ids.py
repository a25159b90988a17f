"""Opaque, time-ordered identifiers: `<prefix>_<ULID>` so that ids sort by creation time."""

from __future__ import annotations

import base64
import os
import time

# RFC 4648 base32 digits, mapped in order onto Crockford's lower-case alphabet, so that the
# text sorts like the number it encodes.
_TO_CROCKFORD = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", "0123456789abcdefghjkmnpqrstvwxyz"
)


def new_id(prefix: str) -> str:
    """48 bits of milliseconds then 80 random bits, as 26 base32 characters."""
    millis = time.time_ns() // 1_000_000
    value = (millis << 80) | int.from_bytes(os.urandom(10), "big")
    # 26 digits hold 130 bits: two zero bits, then the 128. Shifted into 160 bits (20 bytes)
    # they encode without padding, and the first 26 digits are the ones we want.
    digits = base64.b32encode((value << 30).to_bytes(20, "big")).decode()[:26]
    return f"{prefix}_{digits.translate(_TO_CROCKFORD)}"
