"""The auction: every capable agent bids for the task, the highest bid wins.

A bid is a score from 0 to 1, given by a `Scorer` to all the bidders at once. The
capability scorer needs no model: it scores what the agent brings (the share of the
requested skills it has), how free it is (its spare capacity) and how well its cost tier
fits the task's `estimated_complexity` (a simple task suits a low tier, an epic a high
one). A model scorer (`model_scorer.py`, when one is configured) asks an LLM instead, within
a budget, and falls back to these scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from app.core.vocabulary import Complexity
from app.routing.engine.base import TIER_RANK, Candidate, Choice, RoutingContext, Unroutable
from app.tasks.schemas.tasks import RouteRequest, TaskRead

# The tier (by rank) each complexity asks for.
WANTED_TIER = {
    Complexity.SIMPLE: 0,
    Complexity.MEDIUM: 1,
    Complexity.COMPLEX: 2,
    Complexity.EPIC: 2,
}
SKILLS_WEIGHT, ROOM_WEIGHT, TIER_WEIGHT = 0.4, 0.3, 0.3


@dataclass(frozen=True)
class Scores:
    """Each bidder's score (0 to 1) by agent id, and how they were given (for the reason)."""

    by_agent: dict[str, float]
    how: str


class Scorer(Protocol):
    async def score(
        self, task: TaskRead, bidders: Sequence[Candidate], request: RouteRequest
    ) -> Scores: ...


class CapabilityScorer:
    """The deterministic bids: skills, spare capacity, and tier against complexity."""

    async def score(
        self, task: TaskRead, bidders: Sequence[Candidate], request: RouteRequest
    ) -> Scores:
        return capability_scores(task, bidders, request)


def capability_scores(
    task: TaskRead, bidders: Sequence[Candidate], request: RouteRequest
) -> Scores:
    scores = {c.id: capability_score(task, c, request) for c in bidders}
    return Scores(scores, "capability score")


def capability_score(task: TaskRead, candidate: Candidate, request: RouteRequest) -> float:
    agent = candidate.agent
    wanted = set(request.skills)
    skills = len(wanted & set(agent.skills)) / len(wanted) if wanted else 1.0
    room = (agent.max_concurrent_tasks - candidate.held) / agent.max_concurrent_tasks
    distance = abs(TIER_RANK[agent.cost_tier] - WANTED_TIER[task.estimated_complexity])
    tier = 1 - distance / 2
    return SKILLS_WEIGHT * skills + ROOM_WEIGHT * room + TIER_WEIGHT * tier


class Auction:
    """Agents of the requested role (any, without one) bid; skills are scored, not
    required. The highest bid wins; equal bids go to the oldest id."""

    def __init__(self, scorer: Scorer | None = None) -> None:
        self._scorer = scorer or CapabilityScorer()

    async def choose(
        self, task: TaskRead, candidates: Sequence[Candidate], context: RoutingContext
    ) -> Choice | Unroutable:
        request = context.request.model_copy(update={"skills": []})  # bid on, not required
        bidders = [c for c in candidates if c.capable(request)]
        if not bidders:
            return context.none_capable()
        scores = await self._scorer.score(task, bidders, context.request)
        bids = [(scores.by_agent.get(c.id, 0.0), c) for c in bidders]
        score, best = min(bids, key=lambda bid: (-bid[0], bid[1].id))
        return Choice(best.id, f"highest bid {score:.3f} of {len(bids)} ({scores.how})")
