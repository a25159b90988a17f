"""Activation as a pure function: which nodes live, which tasks to make, what each waits on.

Eager instantiation: every task on a live path is planned at once. A node is
live when one of its incoming edges is: an edge is live when its source is, and, leaving
a conditional, when it is the branch the condition chose on the runtime context. Dead
nodes are `skipped`; live control nodes are `completed`; live task nodes are `pending`.

Who gets a task flows down from the nearest `agent_assignment` node before it: an agent's
name (`manual`), or a routing request the task is created with. A task node's own
`assigned_to` overrides either.

What a task waits on is a requirement over task nodes: a node id, `{"all": [...]}` or
`{"any": [...]}`. It is built by walking back through control nodes, so a
`parallel_join` with strategy `any` becomes an `any` of its live branches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core.requirements import Requirement, all_of, any_of
from app.core.states import NodeStatus
from app.core.vocabulary import EdgeType, JoinStrategy, NodeType
from app.tasks.schemas.tasks import RouteRequest
from app.workflows.engine.conditions import evaluate, parse
from app.workflows.engine.workflow_graph import Graph, topological_order
from app.workflows.schemas.workflows import (
    AgentAssignmentConfig,
    ConditionalConfig,
    ParallelJoinConfig,
    TaskStepConfig,
)


@dataclass(frozen=True)
class Assignment:
    """Who gets the tasks below an agent assignment: a named agent, or a routing request."""

    assigned_to: str | None = None
    routing: RouteRequest | None = None

    def __bool__(self) -> bool:
        return self.assigned_to is not None or self.routing is not None


@dataclass(frozen=True)
class PlannedTask:
    node_id: str
    config: TaskStepConfig
    assigned_to: str | None
    waits_for: Requirement
    routing: RouteRequest | None = None


@dataclass(frozen=True)
class ExecutionPlan:
    node_status: dict[str, NodeStatus]
    tasks: list[PlannedTask]  # in topological order


def plan_execution(graph: Graph, context: Mapping[str, Any]) -> ExecutionPlan:
    """The plan of a validated graph (no cycles, one start, conditions that parse)."""
    live: set[str] = set()
    taken: dict[str, EdgeType] = {}  # conditional node -> the branch it takes
    done: dict[str, Requirement] = {}  # what "this node is done" means for its successors
    assignee: dict[str, Assignment] = {}  # the assignment flowing out of each node
    status: dict[str, NodeStatus] = {}
    tasks: list[PlannedTask] = []
    for node_id in topological_order(graph):
        node = graph.nodes[node_id]
        inputs = [
            e
            for e in graph.incoming[node_id]
            if e.source in live and (e.source not in taken or e.type is taken[e.source])
        ]
        if node.type is not NodeType.START and not inputs:
            status[node_id] = NodeStatus.SKIPPED
            continue
        live.add(node_id)
        upstream = [done[e.source] for e in inputs]
        inherited = next((assignee[e.source] for e in inputs if assignee[e.source]), Assignment())
        assignee[node_id] = inherited
        status[node_id] = NodeStatus.COMPLETED
        done[node_id] = all_of(upstream)
        if node.type is NodeType.TASK:
            config = TaskStepConfig.model_validate(node.config)
            waits_for = all_of(upstream)
            if config.assigned_to is not None or config.coordination is not None:
                # A coordinated task is its coordination's: no assignment reaches it.
                planned = PlannedTask(node_id, config, config.assigned_to, waits_for)
            else:
                planned = PlannedTask(
                    node_id, config, inherited.assigned_to, waits_for, inherited.routing
                )
            tasks.append(planned)
            status[node_id] = NodeStatus.PENDING
            done[node_id] = node_id
        elif node.type is NodeType.AGENT_ASSIGNMENT:
            assignment = AgentAssignmentConfig.model_validate(node.config)
            routing = assignment.routing()
            if routing is not None:
                assignee[node_id] = Assignment(routing=routing)
            elif assignment.agent_name is not None:
                assignee[node_id] = Assignment(assigned_to=assignment.agent_name)
        elif node.type is NodeType.CONDITIONAL:
            condition = parse(ConditionalConfig.model_validate(node.config).condition_expression)
            holds = evaluate(condition, context)
            taken[node_id] = EdgeType.CONDITIONAL_TRUE if holds else EdgeType.CONDITIONAL_FALSE
        elif node.type is NodeType.PARALLEL_JOIN:
            strategy = ParallelJoinConfig.model_validate(node.config).join_strategy
            if strategy is JoinStrategy.ANY:
                done[node_id] = any_of(upstream)
    return ExecutionPlan(status, tasks)
