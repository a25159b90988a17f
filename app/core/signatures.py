"""Signatures of webhook bodies, one scheme for both directions (deliveries Loopwright
sends, hooks it receives), after Stripe's and GitHub's:

    Loopwright-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, f"{t}." + body)>

The key is the secret's UTF-8 bytes; the message is the timestamp in decimal ASCII, a dot,
then the body's bytes exactly as sent. A receiver recomputes the HMAC over the raw body it
got, compares in constant time, and refuses a timestamp too far from its own clock (a
replay). Signing the timestamp with the body is what makes that window binding.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "Loopwright-Signature"
SCHEME = "v1"


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of `f"{timestamp}."` followed by `body`, keyed by `secret`."""
    message = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    """The value of `Loopwright-Signature` for `body` sent at `timestamp`."""
    return f"t={timestamp},{SCHEME}={sign(secret, timestamp, body)}"
