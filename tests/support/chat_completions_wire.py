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

import itertools
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
    pause_s: float = 0.0  # between data lines: longer than the client's timeout stalls it

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


Answer = Reply | HttpError | StreamError | Drop
Plan = Answer | Delay[Answer]


class ChatCompletionsWire(WireServer[Answer]):
    """`POST /v1/chat/completions`: each request takes the next planned response, in order."""

    def __init__(self) -> None:
        super().__init__("/v1/chat/completions")

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def refusal(self, message: str) -> HttpError:
        return HttpError(500, f"chat_completions_wire: {message}", "server_error")

    def answer(self, plan: Answer, body: dict[str, Any], n: int) -> Response:
        if not body.get("stream") and not isinstance(plan, HttpError):
            plan = self.refusal("only streams are served")
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
        if isinstance(plan, Reply):
            if plan.model is not None:
                chunk.model = plan.model
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = [*map(_sse, _reply_chunks(plan, chunk, usage)), "data: [DONE]\n\n"]
            return self.stream(events, headers, pause_s=plan.pause_s)
        opening = chunk.delta({"role": "assistant", "content": ""})
        texts = [chunk.delta({"content": piece}) for piece in pieces(plan.partial_text, 4)]
        partial = [_sse(data) for data in (opening, *texts)]
        if isinstance(plan, Drop):
            return self.stream(partial, headers, cut=not plan.clean)
        error = {"message": plan.message, "type": plan.type, "param": None, "code": plan.code}
        return self.stream([*partial, _sse({"error": error})], headers)


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
        arguments = [
            {"index": index, "function": {"arguments": text}}
            for text in pieces(call.text, reply.chunk_chars)
        ]
        per_call.append([opening, *arguments])
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
    for piece in pieces(reply.text, reply.chunk_chars):
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


def chat_completions_wire() -> AbstractAsyncContextManager[ChatCompletionsWire]:
    """A `ChatCompletionsWire` behind a real uvicorn server on a free loopback port."""
    return serving(ChatCompletionsWire())
