"""The dashboard's session cookies: what a cookie must be to be read back, and the login
form's token."""

from __future__ import annotations

import base64
import json

import pytest

from app.core.sessions import Session, Sessions

SECRET = b"s" * 32
KEYS = ["key-zero", "key-one"]


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _sessions(
    keys: list[str] = KEYS, secret: bytes = SECRET, clock: Clock | None = None
) -> Sessions:
    return Sessions(keys, secret=secret, ttl_s=3_600, clock=clock or Clock())


def test_a_cookie_reads_back_as_the_session_it_was_issued_for() -> None:
    sessions = _sessions()
    cookie, issued = sessions.issue(1)
    read = sessions.read(cookie)
    assert read == issued and read.principal == "key-1"
    assert read.expires_at == 1_800_000_000 + 3_600
    assert (
        KEYS[1] not in cookie
        and "key" not in base64.urlsafe_b64decode(cookie.split(".")[0] + "==").decode()
    )


def test_a_session_ends_when_it_expires() -> None:
    clock = Clock()
    sessions = _sessions(clock=clock)
    cookie, _ = sessions.issue(0)
    clock.now += 3_599
    assert sessions.read(cookie) is not None
    clock.now += 1
    assert sessions.read(cookie) is None


def test_a_key_rotated_out_of_the_list_ends_its_sessions() -> None:
    cookie, _ = _sessions().issue(1)
    assert _sessions(["key-zero", "key-one-new"]).read(cookie) is None  # index 1, another key
    assert _sessions(["key-zero"]).read(cookie) is None  # no index 1 any more
    assert _sessions(["key-zero", "key-one", "key-two"]).read(cookie) is not None  # added one


def test_another_secret_refuses_the_cookie() -> None:
    cookie, _ = _sessions().issue(0)
    assert _sessions(secret=b"t" * 32).read(cookie) is None
    # Without a secret each instance (each process start) makes its own.
    assert Sessions(KEYS).read(Sessions(KEYS).issue(0)[0]) is None


def _forge(cookie: str, **changes: object) -> str:
    payload, signature = cookie.split(".")
    fields = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    fields.update(changes)
    raw = json.dumps(fields, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode() + "." + signature


def test_a_changed_payload_is_refused() -> None:
    sessions = _sessions()
    cookie, _ = sessions.issue(0)
    assert sessions.read(_forge(cookie, e=4_000_000_000)) is None  # a longer life
    assert sessions.read(_forge(cookie, k=1)) is None  # another key


@pytest.mark.parametrize(
    "cookie",
    [None, "", "abc", "a.b.c", "!!!.???", "x" * 2_000 + "." + "y", "e30.AAAA"],
)
def test_anything_but_a_cookie_of_ours_is_no_session(cookie: str | None) -> None:
    assert _sessions().read(cookie) is None


def test_the_csrf_token_must_match_exactly() -> None:
    session = Session(0, "token-abc", 0)
    assert session.csrf_matches("token-abc")
    assert not session.csrf_matches(None)
    assert not session.csrf_matches("token-abd")
    assert not session.csrf_matches("")


def test_keys_are_found_by_value() -> None:
    sessions = _sessions()
    assert [sessions.key_index(k) for k in [*KEYS, "nope", ""]] == [0, 1, None, None]
    assert sessions.required and not _sessions([]).required


def test_the_login_form_token_matches_only_its_own_cookie() -> None:
    sessions = _sessions()
    field, cookie = sessions.login_token()
    other_field, other_cookie = sessions.login_token()
    assert sessions.login_token_matches(field, cookie)
    assert not sessions.login_token_matches(other_field, cookie)
    assert not sessions.login_token_matches(field, other_cookie)
    assert not sessions.login_token_matches(field, f"{field}.forged")  # unsigned
    assert not sessions.login_token_matches(None, cookie)
    assert not sessions.login_token_matches(field, None)
    assert not _sessions(secret=b"t" * 32).login_token_matches(field, cookie)
