"""A real local HTTP server that speaks the Anthropic Messages API wire format (JSON and SSE),
answering from a queue of responses the test plans, and recording every request it receives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse, Response

# Re-exported: the tests plan these through this module.
from tests.support.wire_server import Delay as Delay
from tests.support.wire_server import Drop as Drop
from tests.support.wire_server import WireServer, pieces, serving


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


Answer = Reply | HttpError | StreamError | Drop
Plan = Answer | Delay[Answer]


class AnthropicWire(WireServer[Answer]):
    """`POST /v1/messages`: each request takes the next planned response, in order."""

    def __init__(self) -> None:
        super().__init__("/v1/messages")

    def refusal(self, message: str) -> HttpError:
        return HttpError(500, "api_error", f"anthropic_wire: {message}")

    def answer(self, plan: Answer, body: dict[str, Any], n: int) -> Response:
        if not body.get("stream") and isinstance(plan, StreamError | Drop):
            plan = self.refusal("that plan needs stream: true")
        headers = {"request-id": f"req_wire_{n:04d}"}
        if isinstance(plan, HttpError):
            error = {"type": plan.error_type, "message": plan.message}
            content = {"type": "error", "error": error, "request_id": headers["request-id"]}
            return JSONResponse(content, plan.status, headers={**headers, **plan.headers})
        model, message_id = body["model"], f"msg_wire_{n:04d}"
        if not body.get("stream"):
            assert isinstance(plan, Reply)
            return JSONResponse(_whole_message(plan, message_id, model), headers=headers)
        if isinstance(plan, Reply):
            events = map(_sse, _reply_events(plan, message_id, model))
            return self.stream(events, headers, pause_s=plan.pause_s)
        partial = [_sse(event) for event in _partial_events(plan.partial_text, message_id, model)]
        if isinstance(plan, Drop):
            return self.stream(partial, headers, cut=not plan.clean)
        event = {"type": "error", "error": {"type": plan.error_type, "message": plan.message}}
        return self.stream([*partial, _sse(event)], headers)


def _sse(event: dict[str, Any]) -> str:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"


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
        for piece in pieces(block.text, size) or [""]:
            delta = {"type": "text_delta", "text": piece}
            yield {"type": "content_block_delta", "index": index, "delta": delta}
    else:
        yield {"type": "content_block_start", "index": index, "content_block": _empty(block)}
        # Anthropic opens every tool input with an empty fragment.
        for piece in ["", *pieces(json.dumps(block.input), size)]:
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


def _partial_events(text: str, message_id: str, model: str) -> Iterator[dict[str, Any]]:
    """An answer of `text` cut off after its last delta."""
    partial = Reply.text(text)
    yield _message_start(partial, message_id, model)
    if text:
        for event in _block_events(0, Text(text), partial.chunk_chars):
            if event["type"] != "content_block_stop":
                yield event


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


def anthropic_wire() -> AbstractAsyncContextManager[AnthropicWire]:
    """An `AnthropicWire` behind a real uvicorn server on a free loopback port."""
    return serving(AnthropicWire())
