"""A TCP proxy in front of the real Postgres server, so that a test can take the database
away from one engine and give it back: refuse new connections, sever the open ones, or
let one COMMIT through to the server and lose its reply (a commit whose outcome the
client cannot know). Bytes pass through untouched otherwise."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit


class PgProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._refusing = False
        self._lose_commit_reply = False
        self.port = 0
        self.lost_commit_replies = 0
        self.refused = 0  # connections turned away while refusing
        self._turned_away = asyncio.Condition()

    def url(self, database_url: str) -> str:
        """`database_url` pointed at the proxy."""
        parts = urlsplit(database_url)
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{self.port}"))

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.sever()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def refuse(self) -> None:
        """The database is away: open connections are cut, new ones closed at once."""
        self._refusing = True
        self.sever()

    async def turned_away(self, count: int) -> None:
        """Returns once `count` connections were refused in all."""
        async with self._turned_away:
            await self._turned_away.wait_for(lambda: self.refused >= count)

    def restore(self) -> None:
        self._refusing = False

    def sever(self) -> None:
        for writer in list(self._open):
            writer.transport.abort()  # a reset, as a dead server or network gives
        self._open.clear()

    def lose_next_commit_reply(self) -> None:
        """The next COMMIT reaches the server; its connection is cut before the reply."""
        self._lose_commit_reply = True

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if self._refusing:
            client_w.transport.abort()
            async with self._turned_away:
                self.refused += 1
                self._turned_away.notify_all()
            return
        try:
            server_r, server_w = await asyncio.open_connection(*self._upstream)
        except OSError:
            client_w.transport.abort()
            return
        self._open |= {client_w, server_w}
        swallow = asyncio.Event()  # the server's next reply is not relayed: the client is cut
        upstream = asyncio.create_task(self._up(client_r, server_w, swallow))
        downstream = asyncio.create_task(self._down(server_r, client_w, swallow))
        await asyncio.wait({upstream, downstream}, return_when=asyncio.FIRST_COMPLETED)
        for writer in (client_w, server_w):
            writer.transport.abort()
            self._open.discard(writer)
        for task in (upstream, downstream):
            task.cancel()
        await asyncio.gather(upstream, downstream, return_exceptions=True)

    async def _up(
        self, client: asyncio.StreamReader, server: asyncio.StreamWriter, swallow: asyncio.Event
    ) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while chunk := await client.read(65536):
                if self._lose_commit_reply and b"COMMIT" in chunk:
                    self._lose_commit_reply = False
                    swallow.set()
                server.write(chunk)
                await server.drain()

    async def _down(
        self, server: asyncio.StreamReader, client: asyncio.StreamWriter, swallow: asyncio.Event
    ) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while chunk := await server.read(65536):
                if swallow.is_set():  # the server answered the COMMIT: it is durable
                    self.lost_commit_replies += 1
                    client.transport.abort()
                    return
                client.write(chunk)
                await client.drain()


@asynccontextmanager
async def pg_proxy(database_url: str) -> AsyncIterator[PgProxy]:
    parts = urlsplit(database_url)
    proxy = PgProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()
