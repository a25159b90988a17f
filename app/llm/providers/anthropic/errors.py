"""Anthropic's errors in neutral terms: which class each status and error type means,
and the token counts its context-overflow messages state. Pure functions over status,
type, message and headers."""

from __future__ import annotations

import re

from app.llm.provider import Overflow, ProviderError
from app.llm.providers import http_status

# An `event: error` inside a stream arrives after the response has already said 200, so
# its status is the one Anthropic's API pairs with the error's type. An unknown type
# counts as 500 `api_error`: a fault on their side, as retryable as any 5xx.
STATUS_BY_ERROR_TYPE: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
OVERLOADED = 529  # Anthropic's own status: the service is full, whoever asks

# "input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000"
_MAX_TOKENS_OVERFLOW = re.compile(r"exceed context limit:\s*(\d+)\s*\+\s*(\d+)\s*>\s*(\d+)")
# "prompt is too long: 210000 tokens > 200000 maximum" (the counts are not always there)
_PROMPT_TOO_LONG = re.compile(
    r"prompt is too long(?::\s*(\d+)\s*tokens\s*>\s*(\d+))?", re.IGNORECASE
)


def status_error(
    status: int, error_type: str, text: str, headers: dict[str, str], *, mid_stream: bool = False
) -> ProviderError:
    """The error for an answer with an error status (or, `mid_stream`, an `event: error`
    after a 200, whose status is then its type's)."""
    where = ""
    if mid_stream:
        status = STATUS_BY_ERROR_TYPE.get(error_type, 500)
        where = " mid-stream"
    return http_error(status, f"anthropic: {status} {error_type}{where}: {text}", headers)


def http_error(status: int, message: str, headers: dict[str, str]) -> ProviderError:
    """An error status with its message, classed as Anthropic's API means it: 529 is an
    overload, a 400 whose message reports a context overflow is one (with its counts)."""
    overflow = parse_overflow(message) if status == 400 else None
    return http_status.http_error(
        status, message, headers, overloaded=OVERLOADED, overflow=overflow
    )


def parse_overflow(message: str) -> Overflow | None:
    """The counts of a context overflow from Anthropic's message; None if it reports none."""
    match = _MAX_TOKENS_OVERFLOW.search(message)
    if match is not None:
        input_tokens, max_tokens, window = (int(g) for g in match.groups())
        return Overflow(input_tokens, max_tokens, window)
    match = _PROMPT_TOO_LONG.search(message)
    if match is not None:
        prompt, maximum = match.groups()
        return Overflow(
            input_tokens=int(prompt) if prompt else None,
            context_window=int(maximum) if maximum else None,
        )
    return None
