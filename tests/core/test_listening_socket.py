"""The server's listening socket hands asyncio connections that write at once: TCP_NODELAY
on each accepted connection (without it a kept-alive client waited ~40 ms a response)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from app.core.net import listening_socket


async def test_an_accepted_connection_has_nagle_off() -> None:
    accepted: asyncio.Future[socket.socket] = asyncio.get_running_loop().create_future()

    class Grab(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted.set_result(transport.get_extra_info("socket"))

    sock = listening_socket("127.0.0.1", 0)
    server = await asyncio.get_running_loop().create_server(Grab, sock=sock)
    async with server:
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        conn = await asyncio.wait_for(accepted, 5)
        assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        writer.close()
        await writer.wait_closed()


def test_a_port_in_use_is_an_error() -> None:
    with listening_socket("127.0.0.1", 0) as taken, pytest.raises(OSError, match="in use"):
        listening_socket("127.0.0.1", taken.getsockname()[1])
