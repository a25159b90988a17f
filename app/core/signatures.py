"""Webhook signatures, the scheme Stripe uses: `Loopwright-Signature: t=<unix seconds>,
v1=<hex>`, where the hex is HMAC-SHA256 over `f"{t}.".encode() + body` keyed with the
secret. The timestamp is signed with the body, so a delivery replayed later is refused
once it falls out of the tolerance window (and within it, by the server's record of the
signatures it accepted). Pure functions: the clock is the caller's."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from app.core.errors import Conflict, ProblemCode, Unauthorized

SIGNATURE_HEADER = "Loopwright-Signature"
SCHEME = "v1"
MAX_HEADER_CHARS = 2_000  # a few signatures (during a secret's rotation) and a timestamp


class SignatureMissing(Unauthorized):
    """The request carries no `Loopwright-Signature` header."""

    code = ProblemCode.SIGNATURE_MISSING

    def headers(self) -> dict[str, str]:
        return {}


class SignatureInvalid(Unauthorized):
    """The signature does not match the request's body and timestamp under the trigger's
    secret."""

    code = ProblemCode.SIGNATURE_INVALID

    def headers(self) -> dict[str, str]:
        return {}


class SignatureExpired(Unauthorized):
    """The signature's timestamp is outside the tolerance window; sign the request again."""

    code = ProblemCode.SIGNATURE_EXPIRED

    def __init__(self, timestamp: int, now: int, tolerance_s: int) -> None:
        self.timestamp = timestamp
        self.tolerance_s = tolerance_s
        self.skew_s = now - timestamp
        super().__init__(
            f"the signature's timestamp is {abs(self.skew_s)} s "
            f"{'old' if self.skew_s >= 0 else 'ahead'}; at most {tolerance_s} s is accepted"
        )

    def extensions(self) -> dict[str, int]:
        return {"timestamp": self.timestamp, "tolerance_s": self.tolerance_s}

    def headers(self) -> dict[str, str]:
        return {}


class SignatureReused(Conflict):
    """This signature was accepted already: a replayed request starts nothing. A sender
    that retries a delivery sends the same delivery id, which is answered as the first."""

    code = ProblemCode.SIGNATURE_REUSED


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of `f"{timestamp}."` and the body under `secret`."""
    message = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    """The `Loopwright-Signature` value of a request sent at `timestamp`."""
    return f"t={timestamp},{SCHEME}={sign(secret, timestamp, body)}"


@dataclass(frozen=True)
class ParsedSignature:
    timestamp: int
    signatures: tuple[str, ...]  # every `v1=` value (a sender may sign with two secrets)


def parse_header(header: str | None) -> ParsedSignature:
    """The timestamp and `v1` signatures of a header; SignatureMissing or SignatureInvalid
    when there is none, or it is not of that form (unknown schemes are ignored)."""
    if header is None or not header.strip():
        raise SignatureMissing(f"sign the request: a `{SIGNATURE_HEADER}` header is required")
    if len(header) > MAX_HEADER_CHARS:
        raise SignatureInvalid(f"the `{SIGNATURE_HEADER}` header is too long")
    timestamp: int | None = None
    signatures: list[str] = []
    for item in header.split(","):
        name, _, value = item.strip().partition("=")
        if name == "t" and value.isascii() and value.isdigit() and len(value) <= 12:
            timestamp = int(value)
        elif name == SCHEME and value:
            signatures.append(value.lower())
    if timestamp is None or not signatures:
        raise SignatureInvalid(
            f"the `{SIGNATURE_HEADER}` header must read `t=<unix seconds>,{SCHEME}=<hex>`"
        )
    return ParsedSignature(timestamp, tuple(signatures))


def verify(secret: str, header: str | None, body: bytes, *, now: float, tolerance_s: int) -> str:
    """The signature of `header` that matches `body` (hex), or an error: SignatureMissing,
    SignatureInvalid (no `v1` value matches), SignatureExpired (the timestamp is more than
    `tolerance_s` from `now`, either way: checked after the match, so that an unsigned
    guess learns nothing about the clock). Compared in constant time."""
    parsed = parse_header(header)
    expected = sign(secret, parsed.timestamp, body)
    matched = next(
        (s for s in parsed.signatures if hmac.compare_digest(s.encode(), expected.encode())), None
    )
    if matched is None:
        raise SignatureInvalid()
    if abs(int(now) - parsed.timestamp) > tolerance_s:
        raise SignatureExpired(parsed.timestamp, int(now), tolerance_s)
    return matched
