"""A real local HTTP server that speaks the Anthropic Messages API wire format (JSON and SSE),
answering from a queue of responses the test plans, and recording every request it receives."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import socket
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any]
    id: str = "toolu_wire_01"


@dataclass(frozen=True)
class Reply:
    """A whole answer; each block is streamed as several deltas of `chunk_chars` characters."""

    blocks: tuple[Text | ToolUse, ...]
    stop_reason: str | None = None  # None: "tool_use" if a block is one, else "end_turn"
    input_tokens: int = 12
    output_tokens: int = 7
    cache_write_tokens: int = 0  # `cache_creation_input_tokens`
    cache_read_tokens: int = 0  # `cache_read_input_tokens`
    chunk_chars: int = 4
    pause_s: float = 0.0  # between stream events: longer than the client's timeout stalls it

    @classmethod
    def text(cls, text: str, **fields: Any) -> Reply:
        return cls((Text(text),), **fields)

    @classmethod
    def tools(cls, *calls: ToolUse, **fields: Any) -> Reply:
        return cls(calls, **fields)


@dataclass(frozen=True)
class HttpError:
    """An error status with Anthropic's JSON error body and the given headers."""

    status: int
    error_type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamError:
    """A stream that answers 200, starts with `partial_text`, then sends `event: error`."""

    error_type: str = "overloaded_error"
    message: str = "Overloaded"
    partial_text: str = ""


@dataclass(frozen=True)
class Drop:
    """A stream that answers 200, starts with `partial_text`, then the connection is cut
    (or, if `clean`, closed as if the answer were whole, though `message_stop` never came)."""

    partial_text: str = ""
    clean: bool = False


@dataclass(frozen=True)
class Delay:
    """Wait `seconds` before sending anything at all, then answer with `then`."""

    seconds: float
    then: Plan


Plan = Reply | HttpError | StreamError | Drop | Delay


@dataclass(frozen=True)
class Received:
    body: dict[str, Any]
    headers: dict[str, str]  # lower-cased names


class _Dropped(Exception):
    """Raised inside a response that has started, which makes uvicorn cut the connection."""


class _HideDrops(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, _Dropped)


class AnthropicWire:
    """`POST /v1/messages`: each request takes the next planned response, in order."""

    def __init__(self) -> None:
        self.url = ""
        self.requests: list[Received] = []
        self._plans: deque[Plan] = deque()
        self._closing = asyncio.Event()
        self._ids = itertools.count(1)
        self.app = Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])

    def plan(self, *plans: Plan) -> None:
        self._plans.extend(plans)

    async def _sleep(self, seconds: float) -> None:
        # Cut short at shutdown, so a client that gave up does not hold the server open.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)

    async def _messages(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(Received(body, dict(request.headers)))
        n = next(self._ids)
        plan = self._plans.popleft() if self._plans else None
        while isinstance(plan, Delay):
            await self._sleep(plan.seconds)
            plan = plan.then
        if plan is None:
            plan = HttpError(500, "api_error", "anthropic_wire: no response was planned")
        if not body.get("stream") and isinstance(plan, StreamError | Drop):
            plan = HttpError(500, "api_error", "anthropic_wire: that plan needs stream: true")
        headers = {"request-id": f"req_wire_{n:04d}"}
        if isinstance(plan, HttpError):
            error = {"type": plan.error_type, "message": plan.message}
            content = {"type": "error", "error": error, "request_id": headers["request-id"]}
            return JSONResponse(content, plan.status, headers={**headers, **plan.headers})
        model, message_id = body["model"], f"msg_wire_{n:04d}"
        if not body.get("stream"):
            assert isinstance(plan, Reply)
            return JSONResponse(_whole_message(plan, message_id, model), headers=headers)
        events = self._stream(plan, message_id, model)
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)

    async def _stream(
        self, plan: Reply | StreamError | Drop, message_id: str, model: str
    ) -> AsyncIterator[str]:
        if isinstance(plan, Reply):
            for i, event in enumerate(_reply_events(plan, message_id, model)):
                if i and plan.pause_s:
                    await self._sleep(plan.pause_s)
                yield _sse(event)
            return
        partial = Reply.text(plan.partial_text)
        yield _sse(_message_start(partial, message_id, model))
        if plan.partial_text:
            for event in _block_events(0, Text(plan.partial_text), partial.chunk_chars):
                if event["type"] != "content_block_stop":
                    yield _sse(event)
        if isinstance(plan, Drop):
            if plan.clean:
                return
            raise _Dropped
        error = {"type": plan.error_type, "message": plan.message}
        yield _sse({"type": "error", "error": error})


def _sse(event: dict[str, Any]) -> str:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _stop_reason(reply: Reply) -> str:
    if reply.stop_reason is not None:
        return reply.stop_reason
    return "tool_use" if any(isinstance(b, ToolUse) for b in reply.blocks) else "end_turn"


def _message_start(reply: Reply, message_id: str, model: str) -> dict[str, Any]:
    message = {
        **_message_shell(message_id, model),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _usage(reply, output_tokens=1),
    }
    return {"type": "message_start", "message": message}


def _usage(reply: Reply, *, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": reply.cache_write_tokens,
        "cache_read_input_tokens": reply.cache_read_tokens,
    }


def _message_shell(message_id: str, model: str) -> dict[str, Any]:
    return {"id": message_id, "type": "message", "role": "assistant", "model": model}


def _block_events(index: int, block: Text | ToolUse, size: int) -> Iterator[dict[str, Any]]:
    if isinstance(block, Text):
        yield {"type": "content_block_start", "index": index, "content_block": _empty(block)}
        for piece in _chunks(block.text, size):
            delta = {"type": "text_delta", "text": piece}
            yield {"type": "content_block_delta", "index": index, "delta": delta}
    else:
        yield {"type": "content_block_start", "index": index, "content_block": _empty(block)}
        # Anthropic opens every tool input with an empty fragment.
        for piece in ["", *_chunks(json.dumps(block.input), size)]:
            delta = {"type": "input_json_delta", "partial_json": piece}
            yield {"type": "content_block_delta", "index": index, "delta": delta}
    yield {"type": "content_block_stop", "index": index}


def _empty(block: Text | ToolUse) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": ""}
    return {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}


def _reply_events(reply: Reply, message_id: str, model: str) -> Iterator[dict[str, Any]]:
    yield _message_start(reply, message_id, model)
    for index, block in enumerate(reply.blocks):
        yield from _block_events(index, block, reply.chunk_chars)
        if index == 0:
            yield {"type": "ping"}
    delta = {"stop_reason": _stop_reason(reply), "stop_sequence": None}
    yield {"type": "message_delta", "delta": delta, "usage": {"output_tokens": reply.output_tokens}}
    yield {"type": "message_stop"}


def _whole_message(reply: Reply, message_id: str, model: str) -> dict[str, Any]:
    content = [
        {"type": "text", "text": b.text}
        if isinstance(b, Text)
        else {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
        for b in reply.blocks
    ]
    usage = _usage(reply, output_tokens=reply.output_tokens)
    return {
        **_message_shell(message_id, model),
        "content": content,
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": usage,
    }


@asynccontextmanager
async def anthropic_wire() -> AsyncIterator[AnthropicWire]:
    """An `AnthropicWire` behind a real uvicorn server on a free loopback port."""
    wire = AnthropicWire()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    wire.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        wire.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    hide_drops = _HideDrops()
    logging.getLogger("uvicorn.error").addFilter(hide_drops)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if serving.done():
                serving.result()
                raise RuntimeError("the Anthropic wire server stopped during start-up")
            await asyncio.sleep(0.01)
        yield wire
    finally:
        wire._closing.set()
        server.should_exit = True
        await serving
        sock.close()
        logging.getLogger("uvicorn.error").removeFilter(hide_drops)
