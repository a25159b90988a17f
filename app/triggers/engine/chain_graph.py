"""Chains as a graph, checked when a chain trigger is saved: a run of an agent (or an
execution of a workflow) settling starts another agent's run (or another execution). An
edge goes from the chain's source to its target; a cycle (a chain that would, directly or
through others, start its own source again) is refused, and so is a path longer than
`MAX_CHAIN_DEPTH` chains.

The graph is what the chain triggers say. A workflow's tasks are run by agents chosen when
they are assigned, so a cascade through a workflow's tasks is not an edge here; the depth
each fire records (`metadata.trigger.depth`) bounds such cascades at run time instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.core.errors import ValidationFailed
from app.core.vocabulary import TargetKind

MAX_CHAIN_DEPTH = 5


@dataclass(frozen=True, order=True)
class Node:
    """An agent (its runs) or a workflow definition (its executions)."""

    kind: TargetKind
    id: str

    def __str__(self) -> str:
        return f"{'agent' if self.kind is TargetKind.RUN else 'workflow'} {self.id!r}"


@dataclass(frozen=True)
class ChainEdge:
    trigger_id: str
    source: Node
    target: Node


def check(edge: ChainEdge, others: Iterable[ChainEdge]) -> None:
    """Refuse `edge` (a chain being saved) when, with the enabled chains `others`, it
    closes a cycle or makes a path of more than MAX_CHAIN_DEPTH chains; the error names
    `body.target` and spells the path out."""
    out: dict[Node, list[ChainEdge]] = {}
    for other in others:
        if other.trigger_id != edge.trigger_id:
            out.setdefault(other.source, []).append(other)
    out.setdefault(edge.source, []).append(edge)
    cycle = _path(out, edge.target, edge.source, frozenset())
    if cycle is not None:
        path = " → ".join(str(n) for n in [edge.source, *cycle])
        raise ValidationFailed.field("body.target", f"the chain would make a cycle: {path}")
    longest = _longest_through(out, edge)
    if len(longest) - 1 > MAX_CHAIN_DEPTH:
        path = " → ".join(str(n) for n in longest)
        raise ValidationFailed.field(
            "body.target",
            f"the chain would make a path of {len(longest) - 1} chains, over the limit of "
            f"{MAX_CHAIN_DEPTH}: {path}",
        )


def _path(
    out: Mapping[Node, list[ChainEdge]], start: Node, goal: Node, seen: frozenset[Node]
) -> list[Node] | None:
    """Nodes from `start` to `goal` along the edges (both included), or None."""
    if start == goal:
        return [start]
    for edge in out.get(start, []):
        if edge.target not in seen:
            rest = _path(out, edge.target, goal, seen | {start})
            if rest is not None:
                return [start, *rest]
    return None


def _longest_through(out: Mapping[Node, list[ChainEdge]], edge: ChainEdge) -> list[Node]:
    """The longest path of nodes that runs through `edge` (the graph has no cycle)."""
    into: dict[Node, list[Node]] = {}
    for edges in out.values():
        for e in edges:
            into.setdefault(e.target, []).append(e.source)
    onward = {node: [e.target for e in edges] for node, edges in out.items()}
    before = _longest(into, edge.source, {})[::-1]
    return [*before, *_longest(onward, edge.target, {})]


def _longest(
    follow: Mapping[Node, list[Node]], start: Node, memo: dict[Node, list[Node]]
) -> list[Node]:
    """The longest path from `start` (memoised: each node is walked once)."""
    if start not in memo:
        best = [start]
        for nxt in follow.get(start, []):
            path = [start, *_longest(follow, nxt, memo)]
            if len(path) > len(best):
                best = path
        memo[start] = best
    return memo[start]
