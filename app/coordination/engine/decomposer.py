"""The decompose phase's model call: an agent's model, forced to call `submit_decomposition`,
splits the parent task into a DAG of subtasks.

The tool's input is read as a `Decomposition` and checked by `dag.problems`. An invalid
answer (or a text answer) is sent back once with its problems, as the call's turn 1; a
second invalid answer fails the phase. A provider error fails it at once: providers never
retry, and whether a coordination tries again is its caller's policy, not this call's.
Every call's cost is counted under the agent on the parent's lane, also a call that broke
off after the provider had billed its input."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.schemas import AgentRead
from app.approvals.engine.approval_summaries import clip
from app.coordination.engine import dag
from app.coordination.engine.decompose_prompt import SYSTEM, describe
from app.coordination.schemas import MAX_SUBTASKS, Decomposition
from app.core.errors import FieldError
from app.core.messages import Block, Message, TextBlock, ToolResultBlock, ToolUseBlock
from app.costs.engine.call_costs import CallCosts
from app.llm.prices import PriceTable
from app.llm.provider import (
    LLMRequest,
    LLMResponse,
    ModelOwner,
    Provider,
    ProviderError,
    ProviderUnavailable,
    ToolChoice,
    ToolSpec,
    Usage,
)
from app.tasks.schemas.tasks import TaskRead

SUBMIT_DECOMPOSITION = "submit_decomposition"
FORCE_DECOMPOSITION = ToolChoice(type="tool", name=SUBMIT_DECOMPOSITION)
SUBMIT_DECOMPOSITION_TOOL = ToolSpec(
    name=SUBMIT_DECOMPOSITION,
    description=f"Submit the decomposition: 1 to {MAX_SUBTASKS} subtasks that together "
    "carry out the task, each with its title, description and acceptance criteria, and the "
    "subtasks it depends on (by index from 0, or by key), forming no cycle.",
    input_schema=Decomposition.model_json_schema(),
)

TRIES = 2  # the first answer, and one more after its problems were sent back
# A full decomposition (20 subtasks, each with a few criteria) fits; a model's own lower
# limit is kept.
MAX_ANSWER_TOKENS = 8_192
TIMEOUT_S = 120.0  # for each wait on the network, as providers apply `timeout_s`
WHERE = "decomposition"  # the problems' field paths start here
REASON_CHARS = 1_000  # a phase's detail holds at most 2,000

NO_DECOMPOSITION = f"No decomposition was submitted: call {SUBMIT_DECOMPOSITION} with the subtasks."
NOT_RUN = f"Not run: only {SUBMIT_DECOMPOSITION} is offered, once."


class DecompositionFailed(Exception):
    """The decomposer gave no valid decomposition; `reason` says why (for the phase's
    detail)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


ProviderFor = Callable[[ModelOwner, str], Provider]


class Decomposer:
    """Decomposes a parent task on a given agent's model (with the decomposer's own system
    prompt, not the agent's)."""

    def __init__(
        self,
        provider_for: ProviderFor,
        prices: PriceTable,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._provider_for = provider_for
        self._costs = CallCosts(prices, sessionmaker, clock)

    async def decompose(
        self, parent: TaskRead, agent: AgentRead, *, team: Sequence[AgentRead] = ()
    ) -> Decomposition:
        """The parent's subtasks as a valid DAG; `DecompositionFailed` when the model gave
        none in `TRIES` answers, or failed. `team`: the agents the subtasks may be routed
        to, whose roles and skills the model is shown."""
        try:
            provider = self._provider_for(agent, f"decompose:{parent.id}")
        except ProviderUnavailable as exc:
            raise DecompositionFailed(f"the decomposer's model is unavailable: {exc}") from exc
        messages = [Message.user_text(describe(parent, team))]
        problems: list[str] = []
        for turn in range(TRIES):
            request = LLMRequest(
                model=agent.model.name,
                system=SYSTEM,
                messages=list(messages),
                max_tokens=min(agent.model.max_output_tokens, MAX_ANSWER_TOKENS),
                tools=[SUBMIT_DECOMPOSITION_TOOL],
                tool_choice=FORCE_DECOMPOSITION,
                timeout_s=TIMEOUT_S,
                turn=turn,
            )
            response = await self._call(provider, request, parent, agent)
            submitted = _submitted(response)
            if submitted is None:
                problems, feedback = [NO_DECOMPOSITION], NO_DECOMPOSITION
            else:
                answer = _read(submitted.input)
                if isinstance(answer, Decomposition):
                    return answer
                problems, feedback = answer, _asked_again(answer)
            messages += _sent_back(response, submitted, feedback)
        last = "; ".join(problems)
        raise DecompositionFailed(
            clip(f"no valid decomposition in {TRIES} tries; the last: {last}", REASON_CHARS)
        )

    async def _call(
        self, provider: Provider, request: LLMRequest, parent: TaskRead, agent: AgentRead
    ) -> LLMResponse:
        """The response, its cost counted; a provider error is `DecompositionFailed`, with
        what the provider reported billed before it broke off counted."""
        billed: list[Usage] = []
        try:
            response = await provider.complete(request, on_usage=billed.append)
        except ProviderError as exc:
            if billed:
                await self._count(parent, agent, request.model, billed[-1])
            raise DecompositionFailed(
                clip(f"the decomposer's model failed ({exc.error_class}): {exc}", REASON_CHARS)
            ) from exc
        await self._count(parent, agent, response.model, response.usage)
        return response

    async def _count(self, parent: TaskRead, agent: AgentRead, model: str, usage: Usage) -> None:
        await self._costs.count(
            agent_id=agent.id,
            task_id=parent.id,
            provider=agent.model.provider,
            model=model,
            usage=usage,
        )


def _submitted(response: LLMResponse) -> ToolUseBlock | None:
    return next(
        (
            b
            for b in response.content
            if isinstance(b, ToolUseBlock) and b.name == SUBMIT_DECOMPOSITION
        ),
        None,
    )


def _read(arguments: dict[str, Any]) -> Decomposition | list[str]:
    """The submitted decomposition, or each problem with it as `field: message`."""
    try:
        decomposition = Decomposition.model_validate(arguments)
    except ValidationError as exc:
        found = [FieldError(_path(e["loc"]), str(e["msg"])) for e in exc.errors(include_url=False)]
    else:
        found = dag.problems(decomposition, WHERE)
        if not found:
            return decomposition
    return [f"{e.field}: {e.message}" for e in found]


def _path(loc: tuple[int | str, ...]) -> str:
    """A pydantic error's location as `dag.problems` names fields:
    `decomposition.subtasks[1].acceptance_criteria`."""
    return WHERE + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


def _asked_again(problems: list[str]) -> str:
    lines = "\n".join(f"- {p}" for p in problems)
    return f"The decomposition is invalid; submit it again with these fixed:\n{lines}"


def _sent_back(
    response: LLMResponse, submitted: ToolUseBlock | None, feedback: str
) -> list[Message]:
    """The model's answer and the reply that asks again: `feedback` as the result of its
    `submit_decomposition` call, or as text when it made none. Any other tool call is
    answered too (a transcript answers each)."""
    replies: list[Block] = [
        ToolResultBlock(
            tool_use_id=b.id, content=feedback if b is submitted else NOT_RUN, is_error=True
        )
        for b in response.content
        if isinstance(b, ToolUseBlock)
    ]
    if submitted is None:
        replies.append(TextBlock(text=feedback))
    answered = [Message(role="assistant", content=response.content)] if response.content else []
    return [*answered, Message(role="user", content=replies)]
