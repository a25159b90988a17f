"""The listening socket of an HTTP server (`loopwright serve`, and the servers of the tests
and benchmarks)."""

from __future__ import annotations

import socket


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host:port` (port 0: a free one the kernel picks), for
    `uvicorn.Server.serve(sockets=[…])`.

    Made with the protocol named (`IPPROTO_TCP`), unlike `socket.create_server`'s 0:
    asyncio sets TCP_NODELAY only on a socket whose protocol says TCP, and an accepted
    socket takes its listener's. Without it, a response that uvicorn writes in two parts
    (its head, then its body) waits on a kept-alive connection for the client's delayed
    ACK: about 40 ms a request, where it takes 2 (docs/testing.md)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock
