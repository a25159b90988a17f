"""The tool escalation ladder at the tool runner: retry → fallback → degrade → fail, with
each tool's circuit breaker consulted before every attempt. Real tools in a real
registry; sleep and the breakers' clock are injected."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from app.core.breakers import Breakers, CircuitBreakerPolicy
from app.core.messages import ToolUseBlock
from app.runs.loop.retry import ToolRetryPolicy
from app.runs.loop.tool_runner import ToolOutcome, ToolRunner
from app.runs.tools.base import Tool, ToolContext, ToolFailure, define_tool
from app.runs.tools.registry import ToolRegistry

CONTEXT = ToolContext(run_id="run_1", tool_call_id="toolu_1", agent_id="a", conversation_id="c")
BREAKERS = CircuitBreakerPolicy(window_calls=4, min_calls=2, failure_rate=0.5, cooldown_s=30)


class Lab:
    """Tools whose health the test controls, a runner over them, and what it reported."""

    def __init__(self, breakers: CircuitBreakerPolicy = BREAKERS) -> None:
        self.calls: Counter[str] = Counter()
        self.down: set[str] = set()  # tools that fail transiently
        self.now = 0.0
        self.sleeps: list[float] = []
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.runner = ToolRunner(
            ToolRegistry(self._tools()),
            ToolRetryPolicy((0.5, 2.0, 8.0), jitter_ratio=0),
            self._sleep,
            breakers=Breakers(breakers, clock=lambda: self.now),
        )

    def _tools(self) -> list[Tool]:
        def tool(name: str, **options: Any) -> Tool:
            async def handler(context: ToolContext, arguments: dict[str, Any]) -> str:
                self.calls[name] += 1
                if name in self.down or arguments.get("host") in self.down:
                    raise ToolFailure(f"{name} upstream answered 503", transient=True)
                if arguments.get("missing"):
                    raise ToolFailure(f"{name}: no such page")
                return f"{name} found {arguments.get('q')}"

            return define_tool(name, f"Test tool {name}.", {"type": "object"}, handler, **options)

        retried = {"idempotent": True, "retries": True}
        return [
            tool("search", fallback="cached_search", **retried),
            tool("cached_search", idempotent=True),
            tool("weather", optional=True, fallback="cached_search", **retried),
            tool("translate", optional=True),
            tool("book", fallback="cached_search"),  # side-effecting: no retries
            tool("secret_search", fallback="admin_search", optional=True),
            tool("admin_search"),
            tool("fetch", breaker_scope=lambda arguments: arguments.get("host")),
        ]

    async def _sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def run(
        self, name: str, *, allowed: set[str] | None = None, **arguments: Any
    ) -> ToolOutcome:
        async def on_retry(data: dict[str, Any]) -> None:
            self.events.append(("agent.tool.retry", data))

        async def on_event(event_type: str, data: dict[str, Any]) -> None:
            self.events.append((event_type, data))

        call = ToolUseBlock(id="toolu_1", name=name, input={"q": "otters", **arguments})
        return await self.runner.run(
            call,
            CONTEXT,
            allowed=allowed if allowed is not None else self.runner.registry.names(),
            on_retry=on_retry,
            on_event=on_event,
        )

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]


@pytest.fixture
def lab() -> Lab:
    return Lab()


async def test_retries_exhausted_then_the_fallback_answers_with_the_same_input() -> None:
    lab = Lab(CircuitBreakerPolicy(window_calls=10, min_calls=10))
    lab.down = {"search"}
    outcome = await lab.run("search")
    assert not outcome.is_error
    assert outcome.content == (
        "[search failed; this result comes from cached_search]\ncached_search found otters"
    )
    assert (outcome.attempts, outcome.degraded) == (5, False)
    assert lab.calls == Counter(search=4, cached_search=1)
    assert lab.sleeps == [0.5, 2.0, 8.0]
    assert lab.kinds() == ["agent.tool.retry"] * 3 + ["agent.tool.fallback"]
    fallback = [d for k, d in lab.events if k == "agent.tool.fallback"]
    assert fallback == [
        {
            "tool_call_id": "toolu_1",
            "tool": "search",
            "fallback": "cached_search",
            "reason": "failed",
            "error": "Error: search upstream answered 503",
        }
    ]


async def test_an_open_breaker_skips_the_tool_and_goes_straight_to_its_fallback(lab: Lab) -> None:
    lab.down = {"book"}
    for _ in range(2):  # two side-effecting failures open its breaker
        await lab.run("book")
    assert ("agent.breaker.opened", {"breaker": "tool:book", "cooldown_s": 30}) in lab.events
    lab.down.clear()
    lab.calls.clear()
    lab.events.clear()

    outcome = await lab.run("book")

    assert lab.calls == Counter(cached_search=1)  # the tool itself was not called
    assert (outcome.is_error, outcome.attempts) == (False, 1)
    [fallback] = [d for k, d in lab.events if k == "agent.tool.fallback"]
    assert fallback["reason"] == "breaker_open"
    assert "circuit breaker is open" in fallback["error"]
    assert lab.runner.breakers.snapshot()["tool:book"] == "open"


async def test_after_the_cooldown_one_probe_closes_the_tool_breaker(lab: Lab) -> None:
    lab.down = {"translate"}
    for _ in range(2):
        await lab.run("translate")
    lab.down.clear()
    lab.now += 30
    outcome = await lab.run("translate")
    assert (outcome.is_error, outcome.content) == (False, "translate found otters")
    assert lab.kinds()[-1] == "agent.breaker.closed"
    assert lab.runner.breakers.snapshot()["tool:translate"] == "closed"


async def test_a_breaker_that_opens_during_retries_stops_them(lab: Lab) -> None:
    lab.down = {"search", "cached_search"}
    outcome = await lab.run("search")
    # search: fail, retry, fail -> 2/2 failing opens the breaker: no third attempt.
    assert lab.calls["search"] == 2
    assert lab.sleeps == [0.5]
    assert outcome.is_error
    assert outcome.content == (
        "Error: 'search' failed (search upstream answered 503), and so did its fallback "
        "'cached_search' (cached_search upstream answered 503)"
    )


async def test_an_optional_tool_whose_fallback_fails_too_is_withdrawn_for_the_run(
    lab: Lab,
) -> None:
    lab.down = {"weather", "cached_search"}
    outcome = await lab.run("weather")
    assert (outcome.is_error, outcome.degraded) == (True, True)
    assert outcome.content.startswith(
        "Error: the tool 'weather' is unavailable for the rest of this run; continue without it."
    )
    assert "cached_search upstream answered 503" in outcome.content
    [degraded] = [d for k, d in lab.events if k == "agent.tool.degraded"]
    assert degraded["tool"] == "weather"

    # The loop passes the withdrawn tools back: a later call does not reach the tool.
    lab.calls.clear()
    call = ToolUseBlock(id="toolu_2", name="weather", input={})
    later = await lab.runner.run(
        call, CONTEXT, allowed={"weather"}, on_retry=_ignore, unavailable={"weather"}
    )
    assert (later.is_error, later.degraded, later.attempts) == (True, True, 0)
    assert "unavailable for the rest of this run" in later.content
    assert lab.calls == Counter()


async def test_an_optional_tool_without_fallback_degrades_after_a_permanent_failure(
    lab: Lab,
) -> None:
    outcome = await lab.run("translate", missing=True)
    assert (outcome.is_error, outcome.degraded, outcome.attempts) == (True, True, 1)
    assert "(Last error: translate: no such page)" in outcome.content


async def test_a_required_tool_without_fallback_fails_with_its_last_error(lab: Lab) -> None:
    outcome = await lab.run("cached_search", missing=True)
    assert (outcome.content, outcome.is_error, outcome.degraded) == (
        "Error: cached_search: no such page",
        True,
        False,
    )
    assert lab.kinds() == []


async def test_a_tool_with_a_breaker_scope_has_one_breaker_per_service(lab: Lab) -> None:
    lab.down = {"flaky.example"}
    for _ in range(2):
        await lab.run("fetch", host="flaky.example")
    healthy = await lab.run("fetch", host="fine.example")
    refused = await lab.run("fetch", host="flaky.example")
    assert (healthy.is_error, refused.is_error) == (False, True)
    assert "circuit breaker is open" in refused.content
    assert lab.calls["fetch"] == 3
    assert lab.runner.breakers.snapshot() == {
        "tool:fetch:fine.example": "closed",
        "tool:fetch:flaky.example": "open",
    }


async def test_a_permanent_failure_does_not_count_against_the_breaker(lab: Lab) -> None:
    for _ in range(6):
        await lab.run("cached_search", missing=True)
    assert lab.runner.breakers.snapshot()["tool:cached_search"] == "closed"


async def test_a_fallback_the_agent_may_not_use_is_not_run(lab: Lab) -> None:
    outcome = await lab.run("secret_search", allowed={"secret_search"}, missing=True)
    assert lab.calls == Counter(secret_search=1)
    assert (outcome.is_error, outcome.degraded) == (True, True)
    assert "agent.tool.fallback" not in lab.kinds()


async def test_the_four_error_paths_stay_as_they_were(lab: Lab) -> None:
    unknown = await lab.run("no_such_tool")
    assert (unknown.content, unknown.attempts) == ("Error: unknown tool 'no_such_tool'", 0)
    denied = await lab.run("search", allowed=set())
    assert denied.content == "Error: permission denied: this agent may not use 'search'"
    assert lab.calls == Counter()


def test_a_tool_cannot_be_its_own_fallback() -> None:
    async def handler(context: ToolContext, arguments: dict[str, Any]) -> str:
        return ""

    with pytest.raises(ValueError, match="own fallback"):
        define_tool("loop", "Loops.", {"type": "object"}, handler, fallback="loop")


async def _ignore(data: dict[str, Any]) -> None:
    return None
