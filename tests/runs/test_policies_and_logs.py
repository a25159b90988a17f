"""Pure pieces: tool retry spacing, error sanitising, scripted turn positions, JSON logs."""

from __future__ import annotations

import json
import logging
import random

import pytest

from app.core.messages import (
    Message,
    ToolResultBlock,
    ToolUseBlock,
    for_provider,
    pending_tool_uses,
)
from app.core.model_config import ScriptedTurn
from app.core.sanitize import sanitize
from app.llm.provider import LLMRequest
from app.llm.providers.scripted.provider import ScriptedProvider
from app.runs.loop.retry import ToolRetryPolicy, tool_retry_delay
from app.telemetry.logs import JsonFormatter, log_events


@pytest.mark.parametrize(("retry", "base"), [(1, 0.5), (2, 2.0), (3, 8.0)])
def test_tool_retries_wait_half_two_and_eight_seconds_plus_a_quarter_of_jitter(
    retry: int, base: float
) -> None:
    policy = ToolRetryPolicy()
    delays = [tool_retry_delay(policy, retry, random.Random(seed)) for seed in range(200)]
    assert min(delays) >= base and max(delays) <= base * 1.25
    assert max(delays) > base * 1.2  # the jitter is really there
    assert policy.max_retries == 3


def test_a_retry_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        ToolRetryPolicy(delays_s=(-1.0,))
    with pytest.raises(ValueError, match="jitter"):
        ToolRetryPolicy(jitter_ratio=2.0)


@pytest.mark.parametrize(
    ("raw", "must_not_contain", "must_contain"),
    [
        ("open /home/app/secrets/key.pem failed", "/home/app", "[path]"),
        ("GET https://bob:hunter2@api.example.com/v1", "hunter2", "https://***@api.example.com"),
        ("Traceback (most recent call last):\n  File x\nValueError", "File x", "[traceback"),
        ("x" * 2000, "x" * 600, "…"),
    ],
)
def test_error_text_is_sanitised(raw: str, must_not_contain: str, must_contain: str) -> None:
    cleaned = sanitize(raw)
    assert must_not_contain not in cleaned and must_contain in cleaned
    assert len(cleaned) <= 500


def _use(i: str) -> Message:
    return Message(role="assistant", content=[ToolUseBlock(id=i, name="t", input={})])


def _result(i: str) -> Message:
    return Message(role="user", content=[ToolResultBlock(tool_use_id=i, content="ok")])


async def test_the_scripted_model_plays_the_turn_the_request_names() -> None:
    model = ScriptedProvider([ScriptedTurn(text="first"), ScriptedTurn(text="second")])
    history = [Message.user_text("a"), _use("1"), _result("1"), Message.user_text("a note")]

    async def play(turn: int) -> str | None:
        request = LLMRequest(model="m", system="", messages=history, max_tokens=10, turn=turn)
        return Message(role="assistant", content=(await model.complete(request)).content).text

    # Text the loop adds (a note, a summary) does not move the script: the turn does.
    assert [await play(0), await play(1)] == ["first", "second"]
    assert await play(2) == "(the script has no more turns)"


def test_transcripts_close_pending_calls_and_merge_user_messages() -> None:
    history = [Message.user_text("a"), _use("1")]
    assert [c.id for c in pending_tool_uses(history)] == ["1"]
    assert pending_tool_uses([*history, _result("1")]) == []
    merged = for_provider([*history, _result("1"), Message.user_text("b")])
    assert [m.role for m in merged] == ["user", "assistant", "user"]
    assert [b.type for b in merged[-1].content] == ["tool_result", "text"]


def test_committed_events_are_logged_as_json_without_bulky_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="loopwright.events"):
        log_events(
            [("agent_run.completed", {"stop_reason": "end_turn", "result": "long"})], run_id="r1"
        )
    (record,) = caplog.records
    line = json.loads(JsonFormatter().format(record))
    assert line["event"] == "agent_run.completed" and line["run_id"] == "r1"
    assert line["stop_reason"] == "end_turn" and "result" not in line
