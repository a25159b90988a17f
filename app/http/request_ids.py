"""`X-Request-ID`: one id per request, on its response and on every log record it causes.

A client may send its own id (a proxy's, or one it logs itself) to find the request in our
logs; it is kept when it is printable ASCII of at most `MAX_LENGTH` characters, and
replaced otherwise (a header is no place to refuse a request over, and an id we cannot log
safely is no id at all). Every response carries the id back: problem documents, SSE
streams, the body limit's 413 and the 500 of an unexpected error alike.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.errors import AppError
from app.core.ids import new_id
from app.http.problems import problem_response
from app.telemetry.logs import current_request_id

HEADER = "X-Request-ID"
MAX_LENGTH = 128
_HEADER_KEY = HEADER.lower().encode()
log = logging.getLogger(__name__)
_ACCEPTABLE = re.compile(rf"[!-~]{{1,{MAX_LENGTH}}}")  # visible ASCII, no spaces


def accepted(offered: str | None) -> str | None:
    """The client's id if we keep it, else None (a new one is made)."""
    if offered is not None and _ACCEPTABLE.fullmatch(offered):
        return offered
    return None


class RequestIds:
    """ASGI middleware; installed outermost so that the responses of the other middleware
    (the body limit's 413) carry the id too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        offered = next((v for k, v in scope["headers"] if k == _HEADER_KEY), None)
        request_id = accepted(offered.decode("latin-1") if offered is not None else None)
        request_id = request_id or new_id("req")
        encoded = request_id.encode()
        started = finished = False

        async def send_with_id(message: Message) -> None:
            nonlocal started, finished
            if message["type"] == "http.response.start":
                started = True
                headers = [(k, v) for k, v in message.get("headers", []) if k != _HEADER_KEY]
                message = {**message, "headers": [*headers, (_HEADER_KEY, encoded)]}
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                finished = True
            await send(message)

        # Not reset afterwards: uvicorn runs each request in a task of its own, so the value
        # dies with it.
        current_request_id.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            # A bug is still a problem document, and the connection stays usable: an error
            # that escapes to the server makes it drop the connection, and the client's next
            # request on it fails too. The traceback is logged here, with the request's id,
            # which the client can quote from the response.
            log.exception("unexpected error on %s %s", scope.get("method"), scope.get("path"))
            if finished:
                return
            if started:  # half a response is out: only closing the connection ends it
                raise
            response = problem_response(AppError(), scope.get("path"))
            await response(scope, receive, send_with_id)


_DESCRIPTION = (
    "Names this request in the server's logs. Yours is kept when it is 1 to "
    f"{MAX_LENGTH} visible ASCII characters; otherwise (or without one) the server makes one."
)


def declare_in_openapi(schema: dict[str, Any]) -> None:
    """The header on every operation (it is taken by middleware, which FastAPI does not
    see) and on every response."""
    components = schema.setdefault("components", {})
    components.setdefault("parameters", {})["RequestId"] = {
        "name": HEADER,
        "in": "header",
        "required": False,
        "description": _DESCRIPTION,
        "schema": {"type": "string", "pattern": f"^{_ACCEPTABLE.pattern}$"},
    }
    components.setdefault("headers", {})["RequestId"] = {
        "description": "The request's id: the client's `X-Request-ID` if kept, else a new one.",
        "schema": {"type": "string"},
    }
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            parameters = operation.setdefault("parameters", [])
            parameters.append({"$ref": "#/components/parameters/RequestId"})
            for response in operation.get("responses", {}).values():
                headers = response.setdefault("headers", {})
                headers[HEADER] = {"$ref": "#/components/headers/RequestId"}


def install_request_ids(app: FastAPI) -> None:
    """Call after every other `add_middleware`, so that this one is the outermost (and
    answers the unexpected errors of the others too)."""
    app.add_middleware(RequestIds)
