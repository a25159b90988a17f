"""Dropping a client's connection at once, for a response that gives up on its client.

The server closes a connection gracefully after a response it could not finish: its
buffered bytes are written first. A client that stopped reading never takes them, so that
close never happens and the socket stays open. A response that gave up on such a client
resets the connection instead, discarding what is buffered.

The outermost middleware records how to reach the server's transport, which the ASGI
interface does not expose: uvicorn's `send` is a method of an object holding it. Under
another server `abort_connection` finds nothing and returns False; the graceful close is
then all there is.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

_SEND_KEY = "loopwright.server_send"


class ConnectionAborts:
    """ASGI middleware; installed outermost so that it sees the server's own `send`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[_SEND_KEY] = send
        await self.app(scope, receive, send)


def abort_connection(scope: Scope) -> bool:
    """Resets the request's connection; False when the server's transport is out of reach."""
    holder: Any = getattr(scope.get(_SEND_KEY), "__self__", None)
    transport: Any = getattr(holder, "transport", None)
    if not callable(getattr(transport, "abort", None)):
        return False
    # Closing a socket whose unsent bytes the peer never takes would queue the FIN behind
    # them, so the peer would never see it; a zero linger makes the close a reset.
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
    return True
