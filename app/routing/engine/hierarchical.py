"""Hierarchical routing: a task goes to a manager, who delegates it down the reporting
lines (`reports_to`).

It starts at the agent the request names, else at the head of the requested role: an
agent of that role who reports to nobody (the oldest, if several). From there each
manager hands the task to the least busy of its reports whose team (the report and
everyone below it) has a capable agent with room; where no report's team can take it,
the manager keeps it, if it has room and the skills. The task's `delegation_chain` gets
the agents it went through, the manager first and the assignee last.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.routing.engine.base import (
    Candidate,
    Choice,
    RoutingContext,
    Unroutable,
    describe,
    least_busy,
)
from app.tasks.schemas.tasks import TaskRead


class Hierarchical:
    async def choose(
        self, task: TaskRead, candidates: Sequence[Candidate], context: RoutingContext
    ) -> Choice | Unroutable:
        request = context.request
        start = _start(context)
        if isinstance(start, Unroutable):
            return start
        chain = [start]
        while True:
            above = {c.id for c in chain}
            teams = [
                report
                for report in context.reports_of(chain[-1].id)
                if _team_can_take(report, context, set(above))
            ]
            if not teams:
                break
            chain.append(least_busy(teams))
        assignee = chain[-1]
        if not (assignee.has_room and assignee.covers(request.skills)):
            wanted = describe(request.model_copy(update={"role": None}))
            return Unroutable(f"nobody in the team of {start.agent.name!r} {wanted} has room")
        path = " → ".join(c.agent.name for c in chain)
        return Choice(assignee.id, f"delegated: {path}", tuple(c.id for c in chain))


def _start(context: RoutingContext) -> Candidate | Unroutable:
    request = context.request
    if request.agent is not None:
        named = context.find(request.agent)
        return named or Unroutable(f"no agent has the id or name {request.agent!r}")
    if request.role is None:
        return Unroutable("hierarchical routing needs a role or a manager (agent)")
    heads = sorted(
        (
            c
            for c in context.agents.values()
            if c.agent.role == request.role and c.agent.reports_to is None
        ),
        key=lambda c: c.id,
    )
    if not heads:
        return Unroutable(f"no agent of role {request.role!r} reports to nobody")
    return heads[0]


def _team_can_take(member: Candidate, context: RoutingContext, seen: set[str]) -> bool:
    """Someone in `member`'s team (it, and everyone below it) has the skills and room;
    `seen`: agents not to count (the chain above it, and those already walked)."""
    if member.id in seen:  # back up the chain: a loop (the commands refuse them)
        return False
    seen.add(member.id)
    if member.has_room and member.covers(context.request.skills):
        return True
    return any(_team_can_take(r, context, seen) for r in context.reports_of(member.id))
