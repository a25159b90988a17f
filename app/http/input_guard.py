"""Refuses input Postgres cannot store before it reaches a route, as a 422 naming the field.

Python's `json` reads what Postgres refuses to keep, and each of these was a 500:
- NaN, Infinity and -Infinity (not JSON, but `json.loads` takes them), and numbers too
  large for a float (`1e400` reads as infinity): JSONB refuses them, and a task's
  `budget_limit: Infinity` failed as well;
- a NUL character (`\\u0000`), in a string or a key: neither `text` nor JSONB holds one;
- an unpaired UTF-16 surrogate (`\\ud800`): not text at all, so it cannot be encoded for
  the database. (pydantic already refuses both in `str` fields; free-form objects such as
  a run's `metadata` or an activation's `context` took them.)
A NUL in the path or the query string is refused too (`/v1/tasks/a%00b`); headers cannot
carry one (the HTTP parser refuses it).

The body is read only for requests FastAPI would read as JSON, and parsed a second time
here; the structure is walked only when the raw bytes hint at a problem, so a clean body
costs one `json.loads`. Runs inside `BodyLimit`, which bounds what it reads.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.errors import FieldError, ValidationFailed
from app.http.body_limit import replaying
from app.http.problems import problem_response

_NUL = "contains a NUL character (\\u0000), which cannot be stored"
_SURROGATE = "contains an unpaired UTF-16 surrogate (\\ud800-\\udfff), which is not text"
_NON_FINITE = "must be a finite number (NaN and Infinity are not JSON)"
_UNREADABLE = "is not JSON this server reads (UTF-8, numbers up to 4,300 digits, bounded nesting)"
_MAX_ERRORS = 20

# What hints at a NUL or a surrogate in the raw body: their escapes, a surrogate encoded in
# UTF-8 bytes (`json.loads` decodes bytes with "surrogatepass", so it gets through), and NUL
# bytes (a UTF-16 or UTF-32 body, which is then walked whatever it holds).
_SUSPICIOUS = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])|\xed[\xa0-\xbf]|\x00")
_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS"})


class _NonFinite:
    """Stands in for a NaN or an infinity while parsing, so the walk can name its field."""


_NON_FINITE_VALUE = _NonFinite()


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return _NUL
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE
    return None


def _shown(name: str) -> str:
    """A name fit for the problem document (which must itself encode)."""
    if _text_problem(name) is None:
        return name
    return name.encode("unicode_escape").decode("ascii")


def _field(path: tuple[str, ...]) -> str:
    # Body fields are named without a prefix, as in the other validation errors.
    return ".".join(_shown(part) for part in path) or "body"


def target_errors(scope: Scope) -> list[FieldError]:
    """NULs in the (decoded) path and query string."""
    errors: list[FieldError] = []
    if "\x00" in scope.get("path", ""):
        errors.append(FieldError("path", _NUL))
    query: bytes = scope.get("query_string", b"")
    if b"%00" in query or b"\x00" in query:
        for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            if "\x00" in name or "\x00" in value:
                errors.append(FieldError(f"query.{_shown(name)}", _NUL))
    return errors


def body_errors(body: bytes) -> list[FieldError]:
    """What in a JSON body cannot be stored; [] for a clean body or malformed JSON (FastAPI
    reports that itself, as a 422 on `body`). JSON that Python cannot read although it is
    well-formed (not UTF-8, a number over 4,300 digits, nesting deeper than the stack) gets
    the same 422 here instead of FastAPI's generic 400."""
    flagged = False

    def constant(_name: str) -> _NonFinite:
        nonlocal flagged
        flagged = True
        return _NON_FINITE_VALUE

    def number(text: str) -> float | _NonFinite:
        nonlocal flagged
        value = float(text)
        if math.isfinite(value):
            return value
        flagged = True
        return _NON_FINITE_VALUE

    try:
        document = json.loads(body, parse_constant=constant, parse_float=number)
    except json.JSONDecodeError:
        return []
    except (ValueError, RecursionError):
        return [FieldError("body", _UNREADABLE)]
    if not flagged and not _SUSPICIOUS.search(body):
        return []
    return _walk(document)


def _walk(document: Any) -> list[FieldError]:
    # Iterative: json.loads accepts nesting deep enough to exhaust the stack of a recursion.
    errors: list[FieldError] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((), document)]
    while stack and len(errors) < _MAX_ERRORS:
        path, value = stack.pop()
        if value is _NON_FINITE_VALUE:
            errors.append(FieldError(_field(path), _NON_FINITE))
        elif isinstance(value, str):
            problem = _text_problem(value)
            if problem is not None:
                errors.append(FieldError(_field(path), problem))
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                problem = _text_problem(key)
                if problem is not None:
                    errors.append(FieldError(_field((*path, key)), f"(the key) {problem}"))
                stack.append(((*path, key), item))
        elif isinstance(value, list):
            stack.extend(((*path, str(i)), item) for i, item in reversed(list(enumerate(value))))
    return sorted(errors, key=lambda e: e.field)


def _reads_json(scope: Scope) -> bool:
    """FastAPI's rule: no content type, `application/json` or `application/*+json`."""
    content_type = next((v for k, v in scope["headers"] if k == b"content-type"), None)
    if content_type is None:
        return True
    media: bytes = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (
        media.startswith(b"application/") and media.endswith(b"+json")
    )


class InputGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        errors = target_errors(scope)
        if errors:
            await _refuse(errors, scope, receive, send)
            return
        if scope["method"] in _BODYLESS or not _reads_json(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        errors = body_errors(body)
        if errors:
            await _refuse(errors, scope, receive, send)
            return
        await self.app(scope, replaying(body, receive), send)


async def _refuse(errors: list[FieldError], scope: Scope, receive: Receive, send: Send) -> None:
    response = problem_response(ValidationFailed(errors), scope.get("path"))
    await response(scope, receive, send)
