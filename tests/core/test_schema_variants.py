"""A model published as a union of variants accepts exactly what its variants accept, and
the patterns that state a rule in the schema say what the server's checks say."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from app.core import requirements
from app.core.bounds import VERSION_MAX
from app.core.errors import ValidationFailed
from app.core.model_config import (
    AnthropicFallback,
    AnthropicModelConfig,
    FallbackModel,
    HttpFault,
    ModelConfig,
    OpenAIFallback,
    OpenAIModelConfig,
    ScriptedFallback,
    ScriptedFault,
    ScriptedModelConfig,
    ScriptedTurn,
    TextTurn,
    ToolCallsTurn,
    TransportFault,
)
from app.http.headers import IF_MATCH_PATTERN, expected_version
from app.http.pagination import CURSOR_PATTERN, decode_cursor, encode_cursor
from app.runs.schemas.runs import LANE_PATTERN, Answer, HumanResponse, RetryCall, RunCreate
from app.workflows.engine.conditions import ConditionSyntaxError, parse
from app.workflows.schemas.workflows import (
    CONDITION_PATTERN,
    NODE_CONFIGS,
    AgentAssignmentNode,
    ConditionalNode,
    EndNode,
    ParallelJoinNode,
    ParallelSplitNode,
    Requirement,
    StartNode,
    TaskNode,
    WorkflowNode,
)

TURN = {"text": "hi"}
FALLBACK = {"provider": "scripted", "name": "small"}
CASES: list[tuple[type[BaseModel], tuple[type[BaseModel], ...], list[Any]]] = [
    (
        HumanResponse,
        (Answer, RetryCall),
        [
            {"response": "yes"},
            {"action": "answer"},
            {"action": "answer", "response": None},
            {"action": "retry_call"},
            {"action": "retry_call", "response": "x"},
            {"action": "other", "response": "x"},
            {},
        ],
    ),
    (
        ScriptedFault,
        (HttpFault, TransportFault),
        [
            {"status": 503},
            {},
            {"kind": "http"},
            {"kind": "timeout"},
            {"kind": "connection", "status": 502},
            {"kind": "timeout", "status": 200},
            {"kind": "http", "status": 429, "times": 2, "headers": {"retry-after": "1"}},
        ],
    ),
    (
        ScriptedTurn,
        (TextTurn, ToolCallsTurn),
        [
            {"text": "x"},
            {"tool_calls": [{"name": "t"}]},
            {"text": "x", "tool_calls": [{"name": "t"}]},
            {},
            {"tool_calls": []},
            {"text": None, "tool_calls": [{"name": "t"}], "latency_ms": 5},
            {"text": "x", "fault": {"status": 500}},
        ],
    ),
    (
        ModelConfig,
        (AnthropicModelConfig, OpenAIModelConfig, ScriptedModelConfig),
        [
            {"provider": "anthropic", "name": "m"},
            {"provider": "anthropic", "name": "m", "script": None},
            {"provider": "anthropic", "name": "m", "script": [TURN]},
            {"provider": "scripted", "name": "s"},
            {"provider": "scripted", "name": "s", "script": []},
            {"provider": "scripted", "name": "s", "script": [TURN]},
            {"provider": "other", "name": "m"},
            {"provider": "openai", "name": "m", "base_url": "http://localhost:11434/v1"},
            {"provider": "openai", "name": "m", "api_key_env": "GROQ_API_KEY"},
            {"provider": "openai", "name": "m", "api_key_env": "groq"},
            {"provider": "openai", "name": "m", "api_key_env": "LOOPWRIGHT_X_API_KEY"},
            {"provider": "openai", "name": "m", "script": [TURN]},
            {"provider": "anthropic", "name": "m", "api_key_env": "GROQ_API_KEY"},
            {"provider": "anthropic", "name": "m", "api_key_env": None},
            {"provider": "scripted", "name": "s", "script": [TURN], "api_key_env": "A_API_KEY"},
            {"provider": "anthropic", "name": "m", "fallback": {"provider": "openai", "name": "l"}},
            {
                "provider": "anthropic",
                "name": "m",
                "fallback": {"provider": "scripted", "name": "s"},
            },
            {"provider": "openai", "name": "m", "fallback": {"provider": "anthropic", "name": "c"}},
            {"provider": "openai", "name": "m", "fallback": {"provider": "scripted", "name": "c"}},
            {"provider": "scripted", "name": "s", "script": [TURN], "fallback": FALLBACK},
            {"provider": "scripted", "name": "s", "script": [TURN], "fallback": {"name": "x"}},
            {"provider": "anthropic", "name": "m", "fallback_name": "n", "fallback": None},
        ],
    ),
    (
        FallbackModel,
        (AnthropicFallback, OpenAIFallback, ScriptedFallback),
        [
            {"provider": "openai", "name": "l", "base_url": "http://h/v1"},
            {"provider": "openai", "name": "l", "api_key_env": "GROQ_API_KEY"},
            {"provider": "anthropic", "name": "c", "api_key_env": "GROQ_API_KEY"},
            {"provider": "anthropic", "name": "c", "api_key_env": None},
            {"provider": "scripted", "name": "s"},
            {"provider": "scripted", "name": "s", "api_key_env": "GROQ_API_KEY"},
            {"provider": "other", "name": "x"},
            {"name": "x"},
            {"provider": "openai", "name": ""},
        ],
    ),
    (
        WorkflowNode,
        (
            StartNode,
            EndNode,
            TaskNode,
            AgentAssignmentNode,
            ConditionalNode,
            ParallelSplitNode,
            ParallelJoinNode,
        ),
        [
            {"id": "s", "type": "start"},
            {"id": "s", "type": "start", "config": {"x": 1}},
            {"id": "t", "type": "task", "config": {"title": "T"}},
            {"id": "t", "type": "task", "config": {"colour": "red"}},
            {"id": "c", "type": "conditional"},
            {"id": "c", "type": "conditional", "config": {"condition_expression": "a == 1"}},
            {"id": "j", "type": "parallel_join", "config": {"join_strategy": "any"}},
            {"id": "a", "type": "agent_assignment", "config": {"agent_name": "ann"}},
        ],
    ),
]


def _node_accepted(data: dict[str, Any]) -> bool:
    """A workflow node is whole only with a config that fits its type (the engine checks
    it on save, naming the node)."""
    node = WorkflowNode.model_validate(data)
    try:
        NODE_CONFIGS[node.type].model_validate(node.config)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(("model", "variants", "samples"), CASES)
def test_the_variants_accept_what_the_model_accepts(
    model: type[BaseModel], variants: tuple[type[BaseModel], ...], samples: list[Any]
) -> None:
    for sample in samples:
        by_variant = []
        for variant in variants:
            try:
                variant.model_validate(sample)
                by_variant.append(variant.__name__)
            except ValidationError:
                pass
        try:
            model.model_validate(sample)
            accepted = _node_accepted(sample) if model is WorkflowNode else True
        except ValidationError:
            accepted = False
        assert len(by_variant) <= 1, (sample, by_variant)  # published as oneOf
        assert accepted == bool(by_variant), (sample, by_variant)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("env == 'prod'", True),
        ("a", True),
        (' a.b != "x\\n" ', True),
        ("x == -1.5e3", True),
        ("true", True),
        ("'it\\'s' == a", True),
        ("1 == 01", False),
        ("01", False),
        ("'a\\q'", False),
        ("a ==", False),
        ("", False),
        ("a.1", False),
        ("1a", False),
        ("== a", False),
    ],
)
def test_the_condition_pattern_is_the_grammar(text: str, ok: bool) -> None:
    try:
        parse(text)
        parsed = True
    except ConditionSyntaxError:
        parsed = False
    assert parsed == ok
    assert bool(re.search(CONDITION_PATTERN, text)) == ok


def test_if_match_pattern_and_cursor_pattern_agree_with_the_server() -> None:
    for value in ['"1"', 'W/"3"', "7", "*", f'"{VERSION_MAX}"']:
        assert re.fullmatch(IF_MATCH_PATTERN, value)
        expected_version(value)
    for value in ['"0"', "", f'"{VERSION_MAX + 1}"', "abc", '"01"']:
        assert not re.fullmatch(IF_MATCH_PATTERN, value)
    cursor = encode_cursor("task_01abc")
    assert re.fullmatch(CURSOR_PATTERN, cursor) and decode_cursor(cursor) == "task_01abc"
    for forged in ["7461736b00", "zz", "746", "ff"]:
        assert not re.fullmatch(CURSOR_PATTERN, forged)
        with pytest.raises(ValidationFailed):
            decode_cursor(forged)


def test_lane_pattern_refuses_only_names_ending_in_events() -> None:
    for lane in ["a", "team/alpha", "/events/x", "events", "a/event", "x/events "]:
        assert re.fullmatch(LANE_PATTERN, lane)
        RunCreate(agent_id="a", input="x", lane=lane)
    for lane in ["a/events", "/events", "team/alpha/events"]:
        assert not re.fullmatch(LANE_PATTERN, lane)
        with pytest.raises(ValidationError):
            RunCreate(agent_id="a", input="x", lane=lane)


@pytest.mark.parametrize(
    "built",
    [
        "review",
        requirements.NOTHING,
        requirements.all_of(["a", "b"]),
        requirements.any_of(["a", requirements.all_of(["b", "c"])]),
        requirements.all_of([requirements.any_of(["a", "b"]), "c"]),
    ],
)
def test_the_published_requirement_accepts_what_activation_builds(built: Any) -> None:
    TypeAdapter(Requirement).validate_python(built)


@pytest.mark.parametrize("shape", [{"some": ["a"]}, {"all": "a"}, {"all": [], "any": []}, 3])
def test_the_published_requirement_refuses_other_shapes(shape: Any) -> None:
    with pytest.raises(ValidationError):
        TypeAdapter(Requirement).validate_python(shape)
