"""An auction's bids from a model: one LLM call is shown the task and every bidder (name,
role, skills, how busy) and answers a score from 0 to 100 for each, as a JSON object by
agent name.

Its worst case (the prompt's tokens and `max_output_tokens`, at the scorer's price) must
fit the auction's budget (`LOOPWRIGHT_ROUTING__AUCTION_MAX_USD`); the call's real cost is
counted under the agent `router`, on the task's lane (so in the task's and its project's
costs). When the call would cost too much, fails, or answers something else, the bids are
capability scores, and the routing reason says why: routing never waits on a model."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.messages import Message, TextBlock
from app.core.model_config import ModelConfig
from app.costs.engine.call_costs import CallCosts
from app.llm import tokens
from app.llm.prices import PriceTable
from app.llm.provider import LLMRequest, Provider, ProviderError
from app.routing.engine.auction import Scores, capability_scores
from app.routing.engine.base import Candidate
from app.tasks.schemas.tasks import RouteRequest, TaskRead

log = logging.getLogger(__name__)

SCORER_AGENT = "router"  # whose costs the scoring calls are
MAX_ANSWER_TOKENS = 512
TIMEOUT_S = 30.0
SYSTEM = (
    "You assign tasks to agents. Score how well each agent fits the task, from 0 (cannot "
    "do it) to 100 (the best choice), weighing skills, role and how busy it is. Answer "
    'with one JSON object only, mapping each agent\'s name to its score: {"name": 80}.'
)
_OBJECT = re.compile(r"\{.*\}", re.S)


@dataclass(frozen=True)
class _Scorer:
    """The scorer's model, as a provider serves it (its owner)."""

    model: ModelConfig
    id: str = SCORER_AGENT
    version: int = 1


class ModelScorer:
    def __init__(
        self,
        model: ModelConfig,
        provider_for: Callable[[_Scorer, str], Provider],
        prices: PriceTable,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        max_usd: float,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._owner = _Scorer(model)
        self._provider_for = provider_for
        self._prices = prices
        self._costs = CallCosts(prices, sessionmaker, clock)
        self._max_usd = Decimal(str(max_usd))

    async def score(
        self, task: TaskRead, bidders: Sequence[Candidate], request: RouteRequest
    ) -> Scores:
        fallback = capability_scores(task, bidders, request)
        model = self._owner.model
        prompt = Message.user_text(_describe(task, bidders))
        max_tokens = min(model.max_output_tokens, MAX_ANSWER_TOKENS)
        price = self._prices.price(model.provider, model.name)
        if price is not None:
            worst = price.worst_case(tokens.count_request(SYSTEM, [prompt]), max_tokens)
            if worst > self._max_usd:
                return _instead(fallback, f"scoring could cost {worst:.4f} USD, over its budget")
        call = LLMRequest(model.name, SYSTEM, [prompt], max_tokens, timeout_s=TIMEOUT_S)
        try:
            provider = self._provider_for(self._owner, f"route:{task.id}")
            response = await provider.complete(call)
        except ProviderError as exc:
            log.warning("auction scorer failed for task %s: %s", task.id, exc)
            return _instead(fallback, f"the scorer failed: {exc.error_class}")
        await self._costs.count(
            agent_id=SCORER_AGENT,
            task_id=task.id,
            provider=model.provider,
            model=response.model,
            usage=response.usage,
        )
        text = "".join(b.text for b in response.content if isinstance(b, TextBlock))
        by_name = _parsed(text)
        if by_name is None:
            return _instead(fallback, "the scorer's answer was not a JSON object of scores")
        scores = {
            c.id: min(max(float(score), 0.0), 100.0) / 100
            for c in bidders
            if isinstance(score := by_name.get(c.agent.name), int | float)
        }
        if len(scores) < len(bidders):
            return _instead(fallback, "the scorer did not score every bidder")
        return Scores(scores, f"scored by {model.name}")


def _describe(task: TaskRead, bidders: Sequence[Candidate]) -> str:
    lines = [f"Task: {task.title}"]
    if task.description:
        lines.append(task.description)
    lines.append(f"Complexity: {task.estimated_complexity.value}")
    for criterion in task.acceptance_criteria:
        lines.append(f"- must: {criterion}")
    lines.append("Agents:")
    for c in bidders:
        agent = c.agent
        skills = ", ".join(agent.skills) or "none listed"
        lines.append(f"- {agent.name}: role {agent.role}; skills {skills}; {c.load}")
    return "\n".join(lines)


def _parsed(text: str) -> dict[str, object] | None:
    found = _OBJECT.search(text)
    if found is None:
        return None
    try:
        value = json.loads(found.group(0))
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    return {str(k): v for k, v in value.items() if not isinstance(v, bool)}


def _instead(fallback: Scores, why: str) -> Scores:
    return Scores(fallback.by_agent, f"{fallback.how}: {why}")
