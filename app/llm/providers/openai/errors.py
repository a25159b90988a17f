"""OpenAI-compatible servers' errors in neutral terms: which class each status and error
body means, and the token counts their context-overflow messages state. OpenAI's API,
vLLM, llama.cpp, Ollama and LM Studio word an overflow each their own way; every wording
known here is read, and one that states no counts is still an overflow.

Pure functions over status, error body, message and headers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from app.llm.provider import ErrorClass, Overflow, ProviderError
from app.llm.providers.http_status import class_of_status, should_retry

# OpenAI answers 503 when its engine is overloaded ("Slow Down"); local servers when their
# queue is full. Either way the service is full, whoever asks: an overload.
OVERLOADED = 503

# An error sent inside a stream that began with 200 names no status: its body's `code` when
# that is one (vLLM), else the one its `type` goes with (OpenAI). Unknown: a 500.
STATUS_BY_ERROR_TYPE: dict[str, int] = {
    "invalid_request_error": 400,
    "BadRequestError": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "NotFoundError": 404,
    "rate_limit_exceeded": 429,
    "tokens": 429,
    "requests": 429,
    "server_error": 500,
    "InternalServerError": 500,
    "service_unavailable": 503,
}
# A 429 for an account out of credit: no wait makes it pass (a billing problem, as
# Anthropic's 402 is).
_NO_CREDIT = {"insufficient_quota"}

_N = r"(\d[\d,]*)"  # a count, possibly with thousands separators
# OpenAI, and vLLM before 0.9: "This model's maximum context length is 8192 tokens.
# However, you requested 9000 tokens (5000 in the messages, 4000 in the completion)."
# The parts may name the functions (tools) too; everything but the completion is input.
_REQUESTED = re.compile(
    rf"maximum context length is {_N} tokens\.?\s*However, you requested {_N} tokens"
    r"\s*\(([^)]*)\)",
    re.IGNORECASE,
)
_PART = re.compile(rf"{_N} in the (\w+)")
# vLLM before 0.9, the prompt alone: "... However, you requested 33000 tokens in the messages"
# OpenAI: "... However, your messages resulted in 130000 tokens"
# vLLM: "... However, your request has 9000 input tokens"
_INPUT_ONLY = re.compile(
    rf"maximum context length is {_N} tokens\.?\s*However, (?:you requested {_N} tokens in "
    rf"the messages|your messages resulted in {_N} tokens|your request has {_N} input tokens)",
    re.IGNORECASE,
)
# vLLM: "'max_tokens' or 'max_completion_tokens' is too large: 4000. This model's maximum
# context length is 8192 tokens and your request has 5000 input tokens (4000 > 8192 - 5000)."
_TOO_LARGE = re.compile(
    rf"is too large:\s*{_N}\.\s*This model's maximum context length is {_N} tokens and your "
    rf"request has {_N} input tokens",
    re.IGNORECASE,
)
# llama.cpp: "request (9412 tokens) exceeds the available context size (8192 tokens)"
_LLAMA_CPP = re.compile(
    rf"request \({_N} tokens\) exceeds the available context size \({_N} tokens\)",
    re.IGNORECASE,
)
# LM Studio: "Trying to keep the first 9000 tokens when context the overflows. However, the
# model is loaded with context length of only 8192 tokens"
_LM_STUDIO = re.compile(
    rf"keep the first {_N} tokens when context the overflows.*?context length of only {_N}",
    re.IGNORECASE | re.DOTALL,
)
# OpenAI's newer models: "Input tokens exceed the configured limit of 272000 tokens. Your
# messages resulted in 300000 tokens."
_CONFIGURED_LIMIT = re.compile(
    rf"exceed the configured limit of {_N} tokens\.\s*Your messages resulted in {_N} tokens",
    re.IGNORECASE,
)
# Overflows that state no counts: OpenAI's code, llama.cpp's type and wordings, Ollama's,
# LM Studio's, and the wordings above when their counts are cut off.
_OVERFLOW_WORDS = re.compile(
    r"context_length_exceeded|exceed_context_size|context length exceeded"
    r"|exceeds? the (?:available )?context (?:size|window|length)|maximum context length"
    r"|input length exceeds the context length|when context the overflows",
    re.IGNORECASE,
)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def status_error(
    status: int,
    body: object,
    message: str,
    headers: Mapping[str, str],
    *,
    mid_stream: bool = False,
) -> ProviderError:
    """The error for an answer with an error status, whose JSON error object (the
    `error` member, or the whole body as vLLM had it) is `body`; `mid_stream`: an error
    sent inside a stream, whose status then comes from the body."""
    error = body if isinstance(body, dict) else {}
    where = ""
    if mid_stream:
        status = _status_of(error)
        where = " mid-stream"
    kind = error.get("type") or error.get("code") or "error"
    lowered = {k.lower(): v for k, v in headers.items()}
    error_class: ErrorClass = class_of_status(status)
    overflow = None
    if error_class == "bad_request":  # a 400 or another refusal a window can explain
        overflow = parse_overflow(message, error)
        if overflow is not None:
            error_class = "context_overflow"
    elif status == OVERLOADED:
        error_class = "overloaded"
    elif status == 429 and (error.get("code") in _NO_CREDIT or error.get("type") in _NO_CREDIT):
        error_class = "bad_request"
    return ProviderError(
        error_class,
        f"openai: {status} {kind}{where}: {message}",
        status=status,
        headers=lowered,
        overflow=overflow,
        should_retry=should_retry(lowered),
    )


def _status_of(error: dict[str, Any]) -> int:
    code = error.get("code")
    if isinstance(code, int) and 400 <= code <= 599:
        return code
    if isinstance(code, str) and code.isdigit() and 400 <= int(code) <= 599:
        return int(code)
    return STATUS_BY_ERROR_TYPE.get(str(error.get("type")), 500)


def parse_overflow(message: str, error: Mapping[str, Any] | None = None) -> Overflow | None:
    """The counts of a context overflow from the error's message (and llama.cpp's fields,
    `n_prompt_tokens` and `n_ctx`); None if it is not an overflow."""
    error = error or {}
    prompt, n_ctx = error.get("n_prompt_tokens"), error.get("n_ctx")
    if isinstance(prompt, int) and isinstance(n_ctx, int):
        return Overflow(input_tokens=prompt, context_window=n_ctx)
    match = _REQUESTED.search(message)
    if match is not None:
        window, requested, parts = match.groups()
        counts = {kind: _int(n) for n, kind in _PART.findall(parts)}
        completion = counts.pop("completion", None)
        prompt_tokens = sum(counts.values()) if counts else None
        if prompt_tokens is None and completion is not None:
            prompt_tokens = _int(requested) - completion
        return Overflow(prompt_tokens, completion, _int(window))
    match = _TOO_LARGE.search(message)
    if match is not None:
        max_tokens, window, prompt = (_int(g) for g in match.groups())
        return Overflow(prompt, max_tokens, window)
    match = _INPUT_ONLY.search(message)
    if match is not None:
        window, *stated = match.groups()
        prompt = _int(next(n for n in stated if n))
        return Overflow(input_tokens=prompt, context_window=_int(window))
    for pattern in (_LLAMA_CPP, _LM_STUDIO):
        match = pattern.search(message)
        if match is not None:
            prompt, window = (_int(g) for g in match.groups())
            return Overflow(input_tokens=prompt, context_window=window)
    match = _CONFIGURED_LIMIT.search(message)
    if match is not None:
        window, prompt = (_int(g) for g in match.groups())
        return Overflow(input_tokens=prompt, context_window=window)
    code = f"{error.get('code', '')} {error.get('type', '')}"
    if _OVERFLOW_WORDS.search(message) or _OVERFLOW_WORDS.search(code):
        return Overflow()
    return None
