"""The LLM call policy as tables: the decision for every status Anthropic's API answers
(classed by its module), foreground and background, with and without the server's
`x-should-retry`; overflows in neutral terms; the backoff formula; `retry-after` and the
parsing of Anthropic's overflow messages."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from app.llm.policy import (
    LLMRetryPolicy,
    backoff_delay,
    classify,
    retry_after_s,
)
from app.llm.provider import Overflow, ProviderError
from app.llm.providers.anthropic.errors import http_error, parse_overflow

OVERFLOW = "input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000"
TIGHT_OVERFLOW = "input length and `max_tokens` exceed context limit: 198000 + 20000 > 200000"
NO = {"x-should-retry": "false"}
YES = {"x-should-retry": "true"}


def http(status: int, headers: dict[str, str] | None = None, message: str = "") -> ProviderError:
    """The error Anthropic's module makes of this answer."""
    return http_error(status, f"anthropic: {status}: {message}", headers or {})


# (error, foreground, class, retry)
TABLE = [
    # 400: only a context overflow that leaves >= 3,000 tokens for the answer
    (http(400, message=OVERFLOW), True, "context_overflow", True),
    (http(400, message=OVERFLOW), False, "context_overflow", True),
    (http(400, message=TIGHT_OVERFLOW), True, "context_overflow", False),
    (
        http(400, message="prompt is too long: 210000 tokens > 200000 maximum"),
        True,
        "context_overflow",
        False,
    ),
    (http(400, message="messages: field required"), True, "bad_request", False),
    (http(400, NO, message=OVERFLOW), True, "context_overflow", False),
    (http(400, YES, message="messages: field required"), True, "bad_request", True),
    # 401: refresh the credentials, then once more
    (http(401), True, "auth", True),
    (http(401), False, "auth", True),
    (http(401, NO), True, "auth", False),
    # other refusals of the request itself
    (http(402), True, "bad_request", False),
    (http(403), True, "forbidden", False),
    (http(404), True, "not_found", False),
    (http(404), False, "not_found", False),
    (http(413), True, "bad_request", False),
    (http(422), True, "bad_request", False),
    (http(403, YES), True, "forbidden", True),
    # 408, 409, 5xx: transient unless the server says no
    (http(408), True, "request_timeout", True),
    (http(408), False, "request_timeout", True),
    (http(408, NO), True, "request_timeout", False),
    (http(409), True, "conflict", True),
    (http(409), False, "conflict", True),
    (http(409, NO), False, "conflict", False),
    (http(500), True, "server_error", True),
    (http(500), False, "server_error", True),
    (http(500, NO), True, "server_error", False),
    (http(502), False, "server_error", True),
    (http(503, NO), False, "server_error", False),
    (http(504), True, "server_error", True),
    # capacity: only callers someone waits on retry
    (http(429), True, "rate_limited", True),
    (http(429), False, "rate_limited", False),
    (http(429, NO), True, "rate_limited", False),
    (http(429, YES), False, "rate_limited", False),  # our partition protects the service
    (http(529), True, "overloaded", True),
    (http(529), False, "overloaded", False),
    (http(529, NO), True, "overloaded", False),
    (http(529, YES), False, "overloaded", False),
    # the transport
    (ProviderError("timeout", "nothing for 600s"), True, "timeout", True),
    (ProviderError("timeout", "nothing for 600s"), False, "timeout", True),
    (ProviderError("connection", "ConnectError: reset by peer"), True, "connection", True),
    (ProviderError("connection", "stream ended before message_stop"), False, "connection", True),
]


@pytest.mark.parametrize(("error", "foreground", "error_class", "retry"), TABLE)
def test_each_answer_gets_its_class_and_decision(
    error: ProviderError, foreground: bool, error_class: str, retry: bool
) -> None:
    decision = classify(error, foreground=foreground)
    assert (decision.error_class, decision.retry) == (error_class, retry)
    assert decision.reason


def test_a_fixable_overflow_asks_for_exactly_the_room_left() -> None:
    decision = classify(http(400, message=OVERFLOW), foreground=True)
    assert decision.max_tokens == 200_000 - 188_059
    assert not decision.refresh_credentials


def test_an_overflow_leaving_less_than_the_floor_fails_without_a_new_max_tokens() -> None:
    decision = classify(http(400, message=TIGHT_OVERFLOW), foreground=True)
    assert (decision.retry, decision.max_tokens) == (False, None)
    assert "2000" in decision.reason
    relaxed = classify(http(400, message=TIGHT_OVERFLOW), foreground=True, min_output_tokens=1_000)
    assert (relaxed.retry, relaxed.max_tokens) == (True, 2_000)


def test_a_401_asks_for_fresh_credentials() -> None:
    assert classify(http(401), foreground=True).refresh_credentials
    assert not classify(http(500), foreground=True).refresh_credentials


@pytest.mark.parametrize(
    ("error", "counts"),
    [
        (http(400, message="bad"), False),
        (http(401), False),
        (http(404), False),
        (http(408), True),
        (http(429), True),
        (http(500), True),
        (http(529), True),
        (ProviderError("timeout", "t"), True),
        (ProviderError("connection", "c"), True),
    ],
)
def test_only_errors_about_the_service_count_against_its_breaker(
    error: ProviderError, counts: bool
) -> None:
    assert classify(error, foreground=True).service_fault is counts


@pytest.mark.parametrize(
    ("message", "parsed"),
    [
        (OVERFLOW, Overflow(188_059, 20_000, 200_000)),
        (f"anthropic: 400 invalid_request_error: {OVERFLOW}", Overflow(188_059, 20_000, 200_000)),
        ("exceed context limit: 5+6>10", Overflow(5, 6, 10)),
        (
            "prompt is too long: 210000 tokens > 200000 maximum",
            Overflow(input_tokens=210_000, context_window=200_000),
        ),
        ("Prompt is too long", Overflow()),
        ("messages.0.content: field required", None),
    ],
)
def test_anthropic_overflow_token_counts_are_read_from_the_message(
    message: str, parsed: Overflow | None
) -> None:
    assert parse_overflow(message) == parsed


def overflow(counts: Overflow | None) -> ProviderError:
    """A neutral overflow, worded as no vendor words it."""
    return ProviderError("context_overflow", "the context is full", overflow=counts)


@pytest.mark.parametrize(
    ("counts", "retry", "max_tokens"),
    [
        (Overflow(input_tokens=90_000, max_tokens=20_000, context_window=100_000), True, 10_000),
        (Overflow(input_tokens=90_000, context_window=100_000), True, 10_000),
        (Overflow(input_tokens=98_000, max_tokens=20_000, context_window=100_000), False, None),
        (Overflow(input_tokens=120_000, context_window=100_000), False, None),
        (Overflow(max_tokens=20_000), False, None),  # no room can be computed
        (None, False, None),
    ],
)
def test_the_policy_reads_only_the_neutral_overflow_counts(
    counts: Overflow | None, retry: bool, max_tokens: int | None
) -> None:
    decision = classify(overflow(counts), foreground=True)
    assert (decision.error_class, decision.retry) == ("context_overflow", retry)
    assert decision.max_tokens == max_tokens


def test_the_servers_verdict_is_a_neutral_field_not_a_header() -> None:
    error = ProviderError("server_error", "down", status=503, should_retry=False)
    assert classify(error, foreground=True).retry is False
    assert classify(ProviderError("bad_request", "no", should_retry=True), foreground=True).retry


NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, None),
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "Sat, 21 Nov 2026 12:00:45 GMT"}, 45.0),
        ({"retry-after": "Sat, 21 Nov 2026 11:59:00 GMT"}, 0.0),  # already past
        ({"retry-after": "soon"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the precise one wins
        ({"retry-after-ms": "x", "retry-after": "9"}, 9.0),
    ],
)
def test_retry_after_is_read_in_seconds_or_as_an_http_date(
    headers: dict[str, str], seconds: float | None
) -> None:
    assert retry_after_s(headers, now=NOW) == seconds


@pytest.mark.parametrize(
    ("attempt", "base"),
    [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (6, 16.0), (7, 32.0), (8, 32.0), (30, 32.0)],
)
def test_backoff_doubles_from_half_a_second_to_32_s_plus_a_quarter_of_jitter(
    attempt: int, base: float
) -> None:
    delays = [backoff_delay(attempt, random.Random(seed)) for seed in range(200)]
    assert base <= min(delays) and max(delays) <= base * 1.25
    assert max(delays) > base * 1.2  # the jitter is really there
    assert backoff_delay(attempt, random.Random(1)) == backoff_delay(attempt, random.Random(1))


@pytest.mark.parametrize(
    ("retry_after", "persistent", "delay"),
    [
        (0.0, False, 0.0),
        (7.0, False, 7.0),
        (600.0, False, 60.0),  # capped by retry_after_cap_s
        (600.0, True, 600.0),  # persistent mode waits out long outages
        (86_400.0, True, 21_600.0),  # but never past its 6 h cap
    ],
)
def test_a_server_retry_after_replaces_the_formula_within_its_cap(
    retry_after: float, persistent: bool, delay: float
) -> None:
    rng = random.Random(3)
    assert backoff_delay(5, rng, retry_after_s=retry_after, persistent=persistent) == delay


def test_the_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        LLMRetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="jitter"):
        LLMRetryPolicy(jitter_ratio=1.5)
    with pytest.raises(ValueError, match="non-negative"):
        LLMRetryPolicy(base_delay_s=-1)
    with pytest.raises(ValueError, match="positive"):
        LLMRetryPolicy(persistent_chunk_s=0)
