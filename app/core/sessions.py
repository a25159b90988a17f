"""The dashboard's sessions: a cookie, signed with HMAC-SHA256, that says which API key
logged in, until when, and the CSRF token its unsafe requests must send back.

Nothing is stored on the server. A session ends when it expires, when its key leaves the
configured list (the cookie names the key by its index and a keyed hash of it, so a
rotated list refuses it), or when the secret changes: a secret derived at start (none
configured) ends every session at a restart.

    cookie   = base64url(payload) "." base64url(HMAC(secret, "session:" payload))
    payload  = {"k": key index, "h": HMAC(secret, "key:" key)[:16], "c": csrf, "e": expiry}

The login form carries a token of its own before there is a session (`login_token`): a
random nonce in a hidden field and, signed, in a cookie; the two must match.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

SESSION_COOKIE = "lw_session"
LOGIN_COOKIE = "lw_login"
CSRF_HEADER = "X-CSRF-Token"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_MAX_COOKIE_CHARS = 1_000  # ours are ~200: anything longer is not one of them


@dataclass(frozen=True)
class Session:
    """A logged-in browser: the key it logged in with and its CSRF token."""

    key_index: int
    csrf: str
    expires_at: int  # Unix seconds

    @property
    def principal(self) -> str:
        """The same name as the key's bearer requests get (`key-<n>`)."""
        return f"key-{self.key_index}"

    def csrf_matches(self, offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(offered.encode(), self.csrf.encode())


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Sessions:
    """Issues and reads session cookies for the configured `keys` (none: the service is
    open and there are no sessions)."""

    def __init__(
        self,
        keys: Sequence[str],
        *,
        secret: bytes | None = None,
        ttl_s: int = 43_200,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._keys = [key.encode() for key in keys]
        self._secret = secret or secrets.token_bytes(32)
        self.ttl_s = ttl_s
        self._clock = clock

    @property
    def required(self) -> bool:
        """Whether callers must log in: API keys are configured."""
        return bool(self._keys)

    def key_index(self, offered: str) -> int | None:
        """The index of the configured key `offered` is, in constant time per key."""
        found = None
        for index, key in enumerate(self._keys):
            if hmac.compare_digest(offered.encode(), key):
                found = index
        return found

    def issue(self, key_index: int) -> tuple[str, Session]:
        """A new session for the key at `key_index`: the cookie's value and the session."""
        session = Session(key_index, secrets.token_urlsafe(24), int(self._clock()) + self.ttl_s)
        payload = json.dumps(
            {
                "k": key_index,
                "h": self._key_hash(key_index),
                "c": session.csrf,
                "e": session.expires_at,
            },
            separators=(",", ":"),
        ).encode()
        return f"{_b64(payload)}.{_b64(self._sign(b'session:', payload))}", session

    def read(self, cookie: str | None) -> Session | None:
        """The session a cookie holds, or None when it is missing, forged, expired, or
        names a key that is no longer configured."""
        if not cookie or len(cookie) > _MAX_COOKIE_CHARS or cookie.count(".") != 1:
            return None
        encoded, signature = cookie.split(".")
        try:
            payload, offered = _unb64(encoded), _unb64(signature)
        except (binascii.Error, ValueError):
            return None
        if not hmac.compare_digest(offered, self._sign(b"session:", payload)):
            return None
        fields = json.loads(payload)  # signed by us: well-formed
        index, expires_at = fields["k"], fields["e"]
        if expires_at <= self._clock() or not 0 <= index < len(self._keys):
            return None
        if not hmac.compare_digest(fields["h"], self._key_hash(index)):
            return None  # the list changed: this index is another key now
        return Session(index, fields["c"], expires_at)

    def login_token(self) -> tuple[str, str]:
        """A token for one login form: (the form's hidden field, the cookie's value)."""
        nonce = secrets.token_urlsafe(24)
        return nonce, f"{nonce}.{_b64(self._sign(b'login:', nonce.encode()))}"

    def login_token_matches(self, field: str | None, cookie: str | None) -> bool:
        if not field or not cookie or len(cookie) > _MAX_COOKIE_CHARS:
            return False
        nonce, _, signature = cookie.partition(".")
        expected = _b64(self._sign(b"login:", nonce.encode()))
        return hmac.compare_digest(signature.encode(), expected.encode()) and (
            hmac.compare_digest(field.encode(), nonce.encode())
        )

    def _key_hash(self, index: int) -> str:
        return _b64(self._sign(b"key:", self._keys[index])[:16])

    def _sign(self, purpose: bytes, message: bytes) -> bytes:
        return hmac.new(self._secret, purpose + message, hashlib.sha256).digest()
