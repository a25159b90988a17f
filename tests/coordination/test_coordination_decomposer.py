"""The decompose phase's model call: a valid DAG comes back and its cost is counted on the
parent's lane; an invalid answer is sent back once with its problems; a second invalid
answer, a text answer or a provider error is `DecompositionFailed`. Scripted agents, and
the Anthropic provider against a real server speaking its wire format."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.schemas import AgentRead
from app.coordination.engine.decompose_prompt import SYSTEM
from app.coordination.engine.decomposer import SUBMIT_DECOMPOSITION, Decomposer, DecompositionFailed
from app.coordination.schemas import Decomposition
from app.core.config import LLMSettings
from app.core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from app.costs.schemas.costs import CostGroupBy
from app.costs.store import costs as cost_store
from app.llm.model_price import ModelPrice
from app.llm.prices import PriceTable
from app.llm.provider import (
    LLMRequest,
    LLMResponse,
    ModelOwner,
    Provider,
    TextSink,
    ToolChoice,
    UsageSink,
)
from app.llm.providers.anthropic.settings import AnthropicSettings
from app.llm.providers.registry import Providers
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_mutations import CreateTask
from app.tasks.schemas.tasks import TaskCreate, TaskRead
from tests.support.anthropic_wire import AnthropicWire, HttpError, Reply, ToolUse, anthropic_wire

PRICES = PriceTable({"scripted/planner": ModelPrice.of("3", "15")})

VALID = {
    "subtasks": [
        {"key": "schema", "title": "Design the table", "acceptance_criteria": ["it migrates"]},
        {"title": "Write the API", "acceptance_criteria": ["it answers"], "depends_on": [0]},
        {
            "title": "Document it",
            "acceptance_criteria": ["it is in the README"],
            "depends_on": ["schema", 1],
            "role": "writer",
        },
    ]
}
CYCLE = {
    "subtasks": [
        {"key": "a", "title": "A", "acceptance_criteria": ["done"], "depends_on": ["b"]},
        {"key": "b", "title": "B", "acceptance_criteria": ["done"], "depends_on": ["a"]},
    ]
}
NO_CRITERIA = {"subtasks": [{"title": "A", "acceptance_criteria": []}]}
UNKNOWN_KEY = {"subtasks": [{"title": "A", "acceptance_criteria": ["done"], "depends_on": ["z"]}]}


def submits(decomposition: dict[str, Any]) -> dict[str, Any]:
    """A scripted turn that calls `submit_decomposition` (and reports its tokens)."""
    call = {"name": SUBMIT_DECOMPOSITION, "input": decomposition}
    return {"tool_calls": [call], "usage": {"input_tokens": 1_000, "output_tokens": 200}}


def agent(turns: list[dict[str, Any]], **fields: Any) -> AgentRead:
    now = datetime.now(UTC)
    values = {
        "id": "agent_planner",
        "name": "planner",
        "role": "lead",
        "skills": ["planning"],
        "system_prompt": "You are the agent's own persona.",
        "model": {"provider": "scripted", "name": "planner", "script": turns},
        "version": 1,
        "created_at": now,
        "updated_at": now,
    }
    return AgentRead.model_validate(values | fields)


@dataclass
class Recording:
    """A provider that keeps every request it is asked, then passes it on."""

    inner: Provider
    requests: list[LLMRequest] = field(default_factory=list)

    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        self.requests.append(request)
        return await self.inner.complete(request, on_text, on_usage)


@dataclass
class Recorded:
    """The registry's providers, each recording."""

    pool: Providers
    made: list[Recording] = field(default_factory=list)

    def __call__(self, owner: ModelOwner, key: str) -> Provider:
        self.made.append(Recording(self.pool(owner, key)))
        return self.made[-1]

    @property
    def requests(self) -> list[LLMRequest]:
        return [r for provider in self.made for r in provider.requests]


@pytest.fixture
async def providers() -> AsyncIterator[Recorded]:
    pool = Providers(LLMSettings())
    yield Recorded(pool)
    await pool.aclose()


@pytest.fixture
def decomposer(providers: Recorded, sessionmaker: async_sessionmaker[AsyncSession]) -> Decomposer:
    return Decomposer(providers, PRICES, sessionmaker)


@pytest.fixture
async def parent(engine: TaskEngine) -> TaskRead:
    body = TaskCreate(
        title="Add accounts",
        description="Accounts with a table, an API and docs.",
        project="atlas",
        acceptance_criteria=["a client can open an account"],
        estimated_complexity="complex",
        task_structure="mixed",
    )
    return (await engine.submit(CreateTask(body, actor="tester"))).task


async def costs_of(
    sessionmaker: async_sessionmaker[AsyncSession], group: CostGroupBy, task_id: str
) -> dict[str, tuple[int, float]]:
    today = datetime.now(UTC).date()
    async with sessionmaker() as session:
        lines = await cost_store.totals(session, group, start=today, end=today, task_id=task_id)
    return {line.key: (line.calls, line.cost_usd) for line in lines}


def results(message: Message) -> list[ToolResultBlock]:
    return [b for b in message.content if isinstance(b, ToolResultBlock)]


async def test_a_valid_dag_comes_back_and_its_call_counts_on_the_parent_s_lane(
    decomposer: Decomposer,
    providers: Recorded,
    parent: TaskRead,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    backend = agent([submits(VALID)], role="backend", skills=["postgres", "python"])
    team = [backend, agent([submits(VALID)], role="writer", skills=[])]

    got = await decomposer.decompose(parent, agent([submits(VALID)]), team=team)

    assert got == Decomposition.model_validate(VALID)
    assert [s.key for s in got.subtasks] == ["schema", None, None]
    assert [s.depends_on for s in got.subtasks] == [[], [0], ["schema", 1]]
    [request] = providers.requests
    assert request.system == SYSTEM  # the decomposer's prompt, not the agent's persona
    assert request.tool_choice == ToolChoice(type="tool", name=SUBMIT_DECOMPOSITION)
    assert [t.name for t in request.tools] == [SUBMIT_DECOMPOSITION]
    assert request.turn == 0 and request.max_tokens == 4_096  # the model's own limit
    [prompt] = request.messages
    text = "".join(b.text for b in prompt.content if isinstance(b, TextBlock))
    for part in (
        "Add accounts",
        "an API and docs",
        "- a client can open an account",
        "Complexity: complex",
        "Structure: mixed",
        "- backend: postgres, python",
        "- writer: none listed",
    ):
        assert part in text
    # 1,000 tokens in at $3/M and 200 out at $15/M, for the agent, on the parent's lane.
    assert await costs_of(sessionmaker, CostGroupBy.AGENT, parent.id) == {
        "agent_planner": (1, 0.006)
    }
    assert await costs_of(sessionmaker, CostGroupBy.PROJECT, parent.id) == {"atlas": (1, 0.006)}


@pytest.mark.parametrize(
    ("invalid", "problem"),
    [
        (CYCLE, "decomposition.subtasks[1].depends_on[0]: closes the cycle 0 -> 1 -> 0"),
        (NO_CRITERIA, "decomposition.subtasks[0].acceptance_criteria: List should have at least"),
        (UNKNOWN_KEY, "decomposition.subtasks[0].depends_on[0]: no subtask has the key 'z'"),
    ],
)
async def test_an_invalid_answer_is_sent_back_with_its_problems_once(
    decomposer: Decomposer,
    providers: Recorded,
    parent: TaskRead,
    sessionmaker: async_sessionmaker[AsyncSession],
    invalid: dict[str, Any],
    problem: str,
) -> None:
    got = await decomposer.decompose(parent, agent([submits(invalid), submits(VALID)]))

    assert got == Decomposition.model_validate(VALID)
    first, retry = providers.requests
    assert retry.turn == 1 and retry.tool_choice == first.tool_choice
    prompt, answered, asked = retry.messages
    assert prompt == first.messages[0]
    [call] = [b for b in answered.content if isinstance(b, ToolUseBlock)]
    assert answered.role == "assistant" and call.input == invalid
    [result] = results(asked)
    assert result.tool_use_id == call.id and result.is_error and problem in result.content
    assert (await costs_of(sessionmaker, CostGroupBy.AGENT, parent.id))["agent_planner"][0] == 2


async def test_two_invalid_answers_fail_naming_the_problem(
    decomposer: Decomposer, parent: TaskRead
) -> None:
    with pytest.raises(DecompositionFailed) as failed:
        await decomposer.decompose(parent, agent([submits(NO_CRITERIA), submits(CYCLE)]))

    reason = failed.value.reason
    assert reason.startswith("no valid decomposition in 2 tries")
    assert "decomposition.subtasks[1].depends_on[0]: closes the cycle 0 -> 1 -> 0" in reason
    assert "acceptance_criteria" not in reason  # the last answer's problems only


async def test_a_text_answer_is_asked_again_then_fails(
    decomposer: Decomposer, providers: Recorded, parent: TaskRead
) -> None:
    turns = [{"text": "Split it in three."}, {"text": "As I said: three."}]

    with pytest.raises(DecompositionFailed) as failed:
        await decomposer.decompose(parent, agent(turns))

    assert "No decomposition was submitted" in failed.value.reason
    _, retry = providers.requests
    _, answered, asked = retry.messages
    assert answered.content == [TextBlock(text="Split it in three.")]
    assert asked.role == "user" and not results(asked)
    assert SUBMIT_DECOMPOSITION in "".join(
        b.text for b in asked.content if isinstance(b, TextBlock)
    )


async def test_a_provider_that_fails_is_a_failure_with_its_billed_input_counted(
    decomposer: Decomposer,
    providers: Recorded,
    parent: TaskRead,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    overloaded = {
        **submits(VALID),
        "fault": {"status": 529, "message": "Overloaded", "times": 5},
    }

    with pytest.raises(DecompositionFailed) as failed:
        await decomposer.decompose(parent, agent([overloaded]))

    assert "(overloaded)" in failed.value.reason
    assert len(providers.requests) == 1  # not asked again: whether to retry is the caller's
    # The scripted model bills the input as the answer begins: 1,000 tokens at $3/M.
    assert await costs_of(sessionmaker, CostGroupBy.AGENT, parent.id) == {
        "agent_planner": (1, 0.003)
    }


async def test_a_model_without_a_provider_is_a_failure(
    sessionmaker: async_sessionmaker[AsyncSession], parent: TaskRead
) -> None:
    decomposer = Decomposer(Providers(LLMSettings(), kinds={}), PRICES, sessionmaker)

    with pytest.raises(DecompositionFailed) as failed:
        await decomposer.decompose(parent, agent([submits(VALID)]))

    assert failed.value.reason.startswith("the decomposer's model is unavailable: no model")


# Against a real server speaking the Anthropic Messages wire format.

WIRE_MODEL = "claude-wire-test"


@pytest.fixture
async def wire() -> AsyncIterator[AnthropicWire]:
    async with anthropic_wire() as server:
        yield server


@pytest.fixture
async def anthropic(
    wire: AnthropicWire, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[Decomposer]:
    settings = LLMSettings(anthropic=AnthropicSettings(api_key="sk-ant-test", base_url=wire.url))
    pool = Providers(settings)
    yield Decomposer(pool, PRICES, sessionmaker)
    await pool.aclose()


def claude(**model: Any) -> AgentRead:
    return agent([], model={"provider": "anthropic", "name": WIRE_MODEL, **model})


async def test_on_the_wire_the_tool_is_forced_with_the_decomposition_s_schema(
    wire: AnthropicWire, anthropic: Decomposer, parent: TaskRead
) -> None:
    wire.plan(
        Reply.tools(ToolUse(SUBMIT_DECOMPOSITION, CYCLE)),
        Reply.tools(ToolUse(SUBMIT_DECOMPOSITION, VALID, id="toolu_wire_02")),
    )

    got = await anthropic.decompose(parent, claude(max_output_tokens=64_000))

    assert got == Decomposition.model_validate(VALID)
    first, retry = (received.body for received in wire.requests)
    assert first["model"] == WIRE_MODEL and first["system"] == SYSTEM
    assert first["max_tokens"] == 8_192  # the model's limit, capped
    assert first["tool_choice"] == {"type": "tool", "name": SUBMIT_DECOMPOSITION}
    [tool] = first["tools"]
    assert tool["name"] == SUBMIT_DECOMPOSITION
    assert tool["input_schema"] == Decomposition.model_json_schema()
    # The retry answers the first call in the Messages API's own terms.
    assert [m["role"] for m in retry["messages"]] == ["user", "assistant", "user"]
    [result] = retry["messages"][2]["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_wire_01"
    assert result["is_error"] and "closes the cycle" in result["content"]


@pytest.mark.parametrize(
    ("error", "error_class"),
    [
        (HttpError(529, "overloaded_error", "Overloaded"), "overloaded"),
        (HttpError(500, "api_error", "Internal server error"), "server_error"),
    ],
)
async def test_on_the_wire_a_server_error_fails_at_once(
    wire: AnthropicWire,
    anthropic: Decomposer,
    parent: TaskRead,
    error: HttpError,
    error_class: str,
) -> None:
    wire.plan(error, Reply.tools(ToolUse(SUBMIT_DECOMPOSITION, VALID)))

    with pytest.raises(DecompositionFailed) as failed:
        await anthropic.decompose(parent, claude())

    assert f"({error_class})" in failed.value.reason
    assert len(wire.requests) == 1
