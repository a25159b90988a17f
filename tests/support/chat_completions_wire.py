"""A real local HTTP server that speaks OpenAI's Chat Completions wire format (JSON and
SSE), as OpenAI's API and the servers that imitate it (vLLM, Ollama, llama.cpp, LM Studio)
do: answering from a queue of responses the test plans, and recording every request.

Its base URL (what a client's `base_url` is) is `wire.base_url`, `http://127.0.0.1:<port>/v1`.
A streamed answer is: a first chunk with the role, text deltas, tool-call deltas (each call
opened with its id and name, its arguments in pieces, several calls told apart by `index`),
a last chunk with `finish_reason`, a usage chunk without choices when the request asked
for one (`stream_options.include_usage`), then `data: [DONE]`.
"""

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

CREATED = 1_767_225_600  # a fixed `created` time: answers are the same each run


@dataclass(frozen=True)
class ToolCall:
    """A function call; `arguments` a dict (sent as its JSON) or the raw text to send."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str = "call_wire_01"

    @property
    def text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Reply:
    """A whole answer, streamed as deltas of `chunk_chars` characters."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None  # None: "tool_calls" if there are calls, else "stop"
    prompt_tokens: int = 12  # cached ones included, as OpenAI counts them
    completion_tokens: int = 7
    cached_tokens: int = 0  # `prompt_tokens_details.cached_tokens`
    chunk_chars: int = 4
    interleave: bool = False  # the calls' pieces alternate (index tells them apart)
    no_index: bool = False  # tool-call deltas without `index` (some servers leave it out)
    model: str | None = None  # the model named in the chunks; None: the one asked for
    pause_s: float = 0.0  # between chunks: longer than the client's timeout stalls it

    @classmethod
    def tools(cls, *calls: ToolCall, **fields: Any) -> Reply:
        return cls(tool_calls=calls, **fields)


@dataclass(frozen=True)
class HttpError:
    """An error status with OpenAI's JSON error body (`{"error": {...}}`; `top_level`: the
    error object is the body, as vLLM had it) and the given headers; `extra` joins the
    error object (llama.cpp's `n_prompt_tokens` and `n_ctx`)."""

    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    top_level: bool = False


@dataclass(frozen=True)
class StreamError:
    """A stream that answers 200, starts with `partial_text`, then sends an error object
    as a data line (OpenAI and vLLM do, mid-generation)."""

    message: str = "The server had an error while processing your request."
    type: str = "server_error"
    code: str | int | None = None
    partial_text: str = ""


@dataclass(frozen=True)
class Drop:
    """A stream that answers 200, starts with `partial_text`, then the connection is cut
    (or, if `clean`, closed as if the answer were whole, though neither a finish_reason nor
    `[DONE]` came)."""

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


class ChatCompletionsWire:
    """`POST /v1/chat/completions`: each request takes the next planned response, in order."""

    def __init__(self) -> None:
        self.url = ""
        self.requests: list[Received] = []
        self._plans: deque[Plan] = deque()
        self._closing = asyncio.Event()
        self._ids = itertools.count(1)
        self.app = Starlette(
            routes=[Route("/v1/chat/completions", self._completions, methods=["POST"])]
        )

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def plan(self, *plans: Plan) -> None:
        self._plans.extend(plans)

    async def _sleep(self, seconds: float) -> None:
        # Cut short at shutdown, so a client that gave up does not hold the server open.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)

    async def _completions(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(Received(body, dict(request.headers)))
        n = next(self._ids)
        plan = self._plans.popleft() if self._plans else None
        while isinstance(plan, Delay):
            await self._sleep(plan.seconds)
            plan = plan.then
        if plan is None:
            plan = HttpError(500, "chat_completions_wire: no response was planned", "server_error")
        if not body.get("stream") and not isinstance(plan, HttpError):
            plan = HttpError(500, "chat_completions_wire: only streams are served", "server_error")
        headers = {"x-request-id": f"req_wire_{n:04d}"}
        if isinstance(plan, HttpError):
            error = {
                "message": plan.message,
                "type": plan.type,
                "param": None,
                "code": plan.code,
                **plan.extra,
            }
            content = {"object": "error", **error} if plan.top_level else {"error": error}
            return JSONResponse(content, plan.status, headers={**headers, **plan.headers})
        chunk = _Chunks(f"chatcmpl-wire-{n:04d}", body["model"])
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = self._stream(plan, chunk, usage)
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)

    async def _stream(
        self, plan: Reply | StreamError | Drop, chunk: _Chunks, usage: bool
    ) -> AsyncIterator[str]:
        if isinstance(plan, Reply):
            if plan.model is not None:
                chunk.model = plan.model
            for i, data in enumerate(_reply_chunks(plan, chunk, usage)):
                if i and plan.pause_s:
                    await self._sleep(plan.pause_s)
                yield _sse(data)
            yield "data: [DONE]\n\n"
            return
        yield _sse(chunk.delta({"role": "assistant", "content": ""}))
        for piece in _chunks(plan.partial_text, 4) if plan.partial_text else []:
            yield _sse(chunk.delta({"content": piece}))
        if isinstance(plan, Drop):
            if plan.clean:
                return
            raise _Dropped
        error = {"message": plan.message, "type": plan.type, "param": None, "code": plan.code}
        yield _sse({"error": error})


@dataclass
class _Chunks:
    """The chunks of one answer: its id and model in each."""

    id: str
    model: str

    def chunk(self, choices: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.model,
            "system_fingerprint": "fp_wire",
            "choices": choices,
            **fields,
        }

    def delta(
        self, delta: dict[str, Any], finish_reason: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return self.chunk([choice], **fields)


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _finish_reason(reply: Reply) -> str:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_calls" if reply.tool_calls else "stop"


def _call_deltas(reply: Reply) -> Iterator[dict[str, Any]]:
    """Each call opened with its id, name and empty arguments, then its arguments in
    pieces: call after call, or (`interleave`) a delta of each in turn."""
    per_call: list[list[dict[str, Any]]] = []
    for index, call in enumerate(reply.tool_calls):
        function = {"name": call.name, "arguments": ""}
        opening = {"index": index, "id": call.id, "type": "function", "function": function}
        pieces = [
            {"index": index, "function": {"arguments": text}}
            for text in _chunks(call.text, reply.chunk_chars)
        ]
        per_call.append([opening, *pieces])
    if reply.interleave:
        rounds = itertools.zip_longest(*per_call)
        ordered = [delta for round_ in rounds for delta in round_ if delta is not None]
    else:
        ordered = [delta for deltas in per_call for delta in deltas]
    for delta in ordered:
        if reply.no_index:  # the id then says which call a piece belongs to
            index = delta.pop("index")
            delta["id"] = reply.tool_calls[index].id
        yield {"tool_calls": [delta]}


def _reply_chunks(reply: Reply, chunk: _Chunks, usage: bool) -> Iterator[dict[str, Any]]:
    extra = {"usage": None} if usage else {}
    yield chunk.delta({"role": "assistant", "content": ""}, **extra)
    for piece in _chunks(reply.text, reply.chunk_chars):
        yield chunk.delta({"content": piece}, **extra)
    for delta in _call_deltas(reply):
        yield chunk.delta(delta, **extra)
    yield chunk.delta({}, _finish_reason(reply), **extra)
    if usage:
        details = {"cached_tokens": reply.cached_tokens, "audio_tokens": 0}
        yield chunk.chunk(
            [],
            usage={
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                "prompt_tokens_details": details,
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
        )


@asynccontextmanager
async def chat_completions_wire() -> AsyncIterator[ChatCompletionsWire]:
    """A `ChatCompletionsWire` behind a real uvicorn server on a free loopback port."""
    wire = ChatCompletionsWire()
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
                raise RuntimeError("the Chat Completions wire server stopped during start-up")
            await asyncio.sleep(0.01)
        yield wire
    finally:
        wire._closing.set()
        server.should_exit = True
        await serving
        sock.close()
        logging.getLogger("uvicorn.error").removeFilter(hide_drops)
