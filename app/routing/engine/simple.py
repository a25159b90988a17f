"""The strategies that need no scoring: manual (the agent named), role-based (an agent of
the role with the skills) and load-balanced (the capable agent holding fewest tasks)."""

from __future__ import annotations

from collections.abc import Sequence

from app.routing.engine.base import Candidate, Choice, RoutingContext, Unroutable, least_busy
from app.tasks.schemas.tasks import TaskRead


class Manual:
    """The agent the request names, else the task's `assigned_to`, if it has room. Role
    and skills are not checked: a person chose."""

    async def choose(
        self, task: TaskRead, candidates: Sequence[Candidate], context: RoutingContext
    ) -> Choice | Unroutable:
        named = context.request.agent or task.assigned_to
        if named is None:
            return Unroutable("manual routing needs an agent: name one, or set assigned_to")
        agent = context.find(named)
        if agent is None:
            return Unroutable(f"no agent has the id or name {named!r}")
        if not agent.has_room:
            return Unroutable(f"agent {agent.agent.name!r} is at capacity ({agent.load})")
        return Choice(agent.id, f"named: {agent.agent.name}")


class RoleBased:
    """An agent whose role is the requested one and whose skills cover the requested ones;
    of those, the least busy."""

    async def choose(
        self, task: TaskRead, candidates: Sequence[Candidate], context: RoutingContext
    ) -> Choice | Unroutable:
        request = context.request
        if request.role is None:
            return Unroutable("role_based routing needs a role")
        capable = [c for c in candidates if c.capable(request)]
        if not capable:
            return context.none_capable()
        best = least_busy(capable)
        return Choice(best.id, f"role {request.role!r}, {best.load} tasks")


class LoadBalanced:
    """Of the capable agents (the role and skills when requested, else any), the one
    holding the fewest tasks."""

    async def choose(
        self, task: TaskRead, candidates: Sequence[Candidate], context: RoutingContext
    ) -> Choice | Unroutable:
        capable = [c for c in candidates if c.capable(context.request)]
        if not capable:
            return context.none_capable()
        best = least_busy(capable)
        return Choice(best.id, f"least busy: {best.load} tasks")
