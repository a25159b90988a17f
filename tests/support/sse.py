"""A small Server-Sent Events reader over an httpx streaming response."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.support.event_schemas import assert_documented


@dataclass
class SseMessage:
    id: str | None = None
    event: str | None = None
    data_lines: list[str] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)

    @property
    def data(self) -> Any:
        return json.loads("\n".join(self.data_lines))

    @property
    def is_comment_only(self) -> bool:
        return self.id is None and self.event is None and not self.data_lines


async def messages(
    response: httpx.Response, *, published: bool = True
) -> AsyncIterator[SseMessage]:
    """Yields each dispatched message, comment-only blocks (keep-alives) included.
    `published`: each event is checked against what the OpenAPI document publishes for its
    stream (off for a stream a test fills with events of its own)."""
    current = SseMessage()
    async for line in response.aiter_lines():
        if line == "":
            if published and current.event is not None:
                path = response.request.url.path
                assert_documented(path, current.event, current.id, current.data)
            if current.id or current.event or current.data_lines or current.comments:
                yield current
            current = SseMessage()
        elif line.startswith(":"):
            current.comments.append(line[1:].strip())
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "id":
                current.id = value
            elif name == "event":
                current.event = value
            elif name == "data":
                current.data_lines.append(value)


class SseReader:
    """Reads one response's messages across several calls (the body streams only once)."""

    def __init__(self, response: httpx.Response, *, published: bool = True) -> None:
        self._messages = messages(response, published=published)

    async def next_message(self) -> SseMessage:
        return await anext(self._messages)

    async def take(self, count: int, *, persisted_only: bool = False) -> list[SseMessage]:
        """The next `count` real events, skipping keep-alive comments (and, when asked,
        ephemeral previews, which carry no id)."""
        taken: list[SseMessage] = []
        while len(taken) < count:
            message = await self.next_message()
            if message.is_comment_only or (persisted_only and message.id is None):
                continue
            taken.append(message)
        return taken


async def own_events(
    client: httpx.AsyncClient,
    path: str,
    since: int,
    mine: Callable[[SseMessage], bool],
    count: int,
    timeout_s: float = 20,
) -> list[SseMessage]:
    """The first `count` events of the stream at `path` after `since` that are the test's
    own (`mine`): on a shared server the stream carries other tests' events too."""
    found: list[SseMessage] = []
    async with (
        asyncio.timeout(timeout_s),
        client.stream("GET", path, params={"last_event_id": since}) as stream,
    ):
        reader = SseReader(stream)
        while len(found) < count:
            [message] = await reader.take(1)
            if mine(message):
                found.append(message)
    return found
