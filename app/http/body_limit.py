"""ASGI middleware that refuses request bodies over the configured size with a 413 problem,
whether or not the client sent a Content-Length."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.errors import PayloadTooLarge
from app.http.problems import problem_response

_DRAIN_LIMIT_BYTES = 64 * 1_048_576


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` for an app downstream of a middleware that read the whole body: the body
    in one message, then what the client sends next (its disconnect)."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class BodyLimit:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in {"GET", "HEAD", "OPTIONS"}:
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._refuse(scope, receive, send)
            return
        # Read the whole (bounded) body first, then hand it to the app from memory.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        await self.app(scope, replaying(body, receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Read (and drop) what the client is still sending, within reason, so that it gets
        # to read the 413 instead of a connection reset while it writes.
        discarded = 0
        while discarded < _DRAIN_LIMIT_BYTES:
            message = await receive()
            discarded += len(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        response = problem_response(PayloadTooLarge(self.max_body_bytes), scope.get("path"))
        response.headers["Connection"] = "close"
        await response(scope, receive, send)
