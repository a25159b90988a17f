"""What a routing strategy sees and says: the candidates (agents with room, and how busy
and how dear each is), the request, and a choice or the reason there is none."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol

from app.agents.schemas import AgentRead
from app.core.vocabulary import CostTier
from app.tasks.schemas.tasks import RouteRequest, TaskRead

TIER_RANK = {CostTier.LOW: 0, CostTier.MEDIUM: 1, CostTier.HIGH: 2}


@dataclass(frozen=True)
class Candidate:
    """An agent as routing sees it: `held`, the tasks it holds now; `price_per_mtok`, its
    model's input plus output price in USD per million tokens (None: not priced).
    `bounded` False: planning work that starts later, so room is not asked now (the
    assignment checks it when the work starts)."""

    agent: AgentRead
    held: int
    price_per_mtok: Decimal | None = None
    bounded: bool = True

    @property
    def id(self) -> str:
        return self.agent.id

    @property
    def has_room(self) -> bool:
        return not self.bounded or self.held < self.agent.max_concurrent_tasks

    @property
    def load(self) -> str:
        return f"holds {self.held} of {self.agent.max_concurrent_tasks}"

    def covers(self, skills: Collection[str]) -> bool:
        return set(skills) <= set(self.agent.skills)

    def capable(self, request: RouteRequest) -> bool:
        """Of the request's role (when it names one), with every skill it lists."""
        role_fits = request.role is None or self.agent.role == request.role
        return role_fits and self.covers(request.skills)


def least_busy(candidates: Sequence[Candidate]) -> Candidate:
    """Fewest held tasks, then the oldest id: the tie-break every strategy ends with."""
    return min(candidates, key=lambda c: (c.held, c.id))


@dataclass(frozen=True)
class Choice:
    """The agent to assign, why (the transition's reason), and for hierarchical routing
    the chain of agents the task went down (manager first, the assignee last)."""

    agent_id: str
    reason: str
    delegation: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unroutable:
    """No agent can take the task now, and why."""

    reason: str


@dataclass(frozen=True)
class RoutingContext:
    """The request, and every agent by id, with room or not (a strategy that names an agent
    or walks a reporting line needs the full ones too)."""

    request: RouteRequest
    agents: Mapping[str, Candidate] = field(default_factory=dict)

    def find(self, agent: str) -> Candidate | None:
        """An agent by id, else by name (the oldest of that name)."""
        if agent in self.agents:
            return self.agents[agent]
        named = sorted(
            (c for c in self.agents.values() if c.agent.name == agent), key=lambda c: c.id
        )
        return named[0] if named else None

    def reports_of(self, manager_id: str) -> list[Candidate]:
        return sorted(
            (c for c in self.agents.values() if c.agent.reports_to == manager_id),
            key=lambda c: c.id,
        )

    def none_capable(self) -> Unroutable:
        """Why no candidate fits: nobody is capable at all, or the capable are all full."""
        wanted = describe(self.request)
        full = [c for c in self.agents.values() if c.capable(self.request)]
        if not full:
            return Unroutable(f"no agent is {wanted}")
        return Unroutable(f"every agent {wanted} is at capacity ({len(full)} of them)")


def describe(request: RouteRequest) -> str:
    """`of role 'writer' with skills python, sql`, for reasons."""
    parts = []
    if request.role is not None:
        parts.append(f"of role {request.role!r}")
    if request.skills:
        parts.append(f"with skills {', '.join(request.skills)}")
    return " ".join(parts) or "available"


class RoutingStrategy(Protocol):
    """Picks the agent for a task from `candidates`: the agents with room, oldest id
    first; `context` has the request and every agent."""

    async def choose(
        self, task: TaskRead, candidates: Sequence[Candidate], context: RoutingContext
    ) -> Choice | Unroutable: ...
