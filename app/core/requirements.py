"""What a workflow's task node waits on: a requirement over task nodes, as data.

A requirement is a node id, `{"all": [...]}` or `{"any": [...]}`. Activation builds one per
task node by walking back through control nodes (a `parallel_join` with strategy `any`
becomes an `any` of its live branches); a pending node is ready once its requirement is
met by the completed ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from app.core.states import NodeStatus

Requirement = str | dict[str, list[Any]]
NOTHING: Requirement = {"all": []}  # the requirement that is always met


def all_of(items: Iterable[Requirement]) -> Requirement:
    parts: list[Requirement] = []
    for item in items:
        parts += item["all"] if isinstance(item, dict) and "all" in item else [item]
    return _combine("all", parts)


def any_of(items: Iterable[Requirement]) -> Requirement:
    parts: list[Requirement] = []
    for item in items:
        if item == NOTHING:  # a branch with no task is done at once, and so is the join
            return NOTHING
        parts += item["any"] if isinstance(item, dict) and "any" in item else [item]
    return _combine("any", parts)


def _combine(kind: str, parts: list[Requirement]) -> Requirement:
    unique = list({json.dumps(p, sort_keys=True): p for p in parts}.values())
    if len(unique) == 1:
        return unique[0]
    return {kind: unique} if unique else NOTHING


def satisfied(requirement: Requirement, completed: set[str]) -> bool:
    if isinstance(requirement, str):
        return requirement in completed
    if "any" in requirement:
        return any(satisfied(r, completed) for r in requirement["any"])
    return all(satisfied(r, completed) for r in requirement["all"])


def ready_nodes(node_status: Mapping[str, str], waits_for: Mapping[str, Requirement]) -> list[str]:
    """Task nodes that are pending and whose requirement is met."""
    completed = {n for n, s in node_status.items() if s == NodeStatus.COMPLETED}
    return [
        node_id
        for node_id, requirement in waits_for.items()
        if node_status.get(node_id) == NodeStatus.PENDING and satisfied(requirement, completed)
    ]


def leaves(requirement: Requirement) -> list[str]:
    """The task nodes a requirement names, in order."""
    if isinstance(requirement, str):
        return [requirement]
    return [leaf for part in next(iter(requirement.values())) for leaf in leaves(part)]


def still_possible(
    node_status: Mapping[str, str], waits_for: Mapping[str, Requirement]
) -> set[str]:
    """Task nodes that are completed or may yet complete: running ones, and pending ones
    whose requirement can still be met by those (not through a failed or cancelled node)."""
    possible = {
        n
        for n in waits_for
        if node_status.get(n) in (NodeStatus.COMPLETED, NodeStatus.RUNNING, NodeStatus.PENDING)
    }
    while True:  # drop pending nodes that wait on what cannot happen, until none is left
        doomed = {
            n
            for n in possible
            if node_status.get(n) == NodeStatus.PENDING and not satisfied(waits_for[n], possible)
        }
        if not doomed:
            return possible
        possible -= doomed
