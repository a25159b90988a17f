"""Pure rules over a workflow definition's graph: validation, topological order, YAML export.

Two levels of checking. `structural_issues` is what saving a definition requires (ids are
unique, edges join known nodes, each node's config fits its type, conditions parse): an
editor may save an unfinished graph. `validate_workflow` adds the semantic rules (one
start, one end, reachability, branch shapes, task titles, no cycles), which
activation requires. Every issue names the node or the edge at fault.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from app.coordination.engine.dag import problems as dag_problems
from app.core.graphs import closing_cycles
from app.core.vocabulary import EdgeType, NodeType
from app.workflows.engine.conditions import ConditionSyntaxError, parse
from app.workflows.schemas.workflows import (
    NODE_CONFIGS,
    ConditionalConfig,
    ParallelJoinConfig,
    TaskStepConfig,
    ValidationIssue,
    WorkflowEdge,
    WorkflowNode,
)

_BRANCH_EDGES = {EdgeType.CONDITIONAL_TRUE, EdgeType.CONDITIONAL_FALSE}


@dataclass
class Graph:
    """Nodes by id with their edges in definition order; edges to unknown nodes are left
    out (`structural_issues` reports them)."""

    nodes: dict[str, WorkflowNode]
    edges: list[WorkflowEdge]
    outgoing: dict[str, list[WorkflowEdge]] = field(default_factory=lambda: defaultdict(list))
    incoming: dict[str, list[WorkflowEdge]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def of(cls, nodes: Sequence[WorkflowNode], edges: Sequence[WorkflowEdge]) -> Graph:
        by_id: dict[str, WorkflowNode] = {}
        for node in nodes:
            by_id.setdefault(node.id, node)
        graph = cls(by_id, [e for e in edges if e.source in by_id and e.target in by_id])
        for edge in graph.edges:
            graph.outgoing[edge.source].append(edge)
            graph.incoming[edge.target].append(edge)
        return graph

    def of_type(self, node_type: NodeType) -> list[WorkflowNode]:
        return [n for n in self.nodes.values() if n.type is node_type]


def _node_issue(rule: str, node_id: str, message: str) -> ValidationIssue:
    return ValidationIssue(rule=rule, message=f"node {node_id!r}: {message}", node_id=node_id)


def _edge_issue(rule: str, edge_id: str, message: str) -> ValidationIssue:
    return ValidationIssue(rule=rule, message=f"edge {edge_id!r}: {message}", edge_id=edge_id)


def structural_issues(
    nodes: Sequence[WorkflowNode], edges: Sequence[WorkflowEdge]
) -> list[ValidationIssue]:
    """What a definition must satisfy to be saved at all."""
    issues: list[ValidationIssue] = []
    seen: set[str] = set()
    for node in nodes:
        if node.id in seen:
            issues.append(_node_issue("duplicate_node_id", node.id, "the id is used twice"))
        seen.add(node.id)
        issues += _config_issues(node)
    seen_edges: set[str] = set()
    for edge in edges:
        if edge.id in seen_edges:
            issues.append(_edge_issue("duplicate_edge_id", edge.id, "the id is used twice"))
        seen_edges.add(edge.id)
        for end in (edge.source, edge.target):
            if end not in seen:
                issues.append(_edge_issue("unknown_node", edge.id, f"no node {end!r}"))
    return issues


def _config_issues(node: WorkflowNode) -> list[ValidationIssue]:
    try:
        config = NODE_CONFIGS[node.type].model_validate(node.config)
    except ValidationError as exc:
        return [
            _node_issue(
                "node_config",
                node.id,
                f"config.{'.'.join(str(p) for p in error['loc']) or '?'}: {error['msg']}",
            )
            for error in exc.errors()
        ]
    if isinstance(config, ConditionalConfig):
        try:
            parse(config.condition_expression)
        except ConditionSyntaxError as exc:
            return [_node_issue("condition_syntax", node.id, f"condition_expression: {exc}")]
    if isinstance(config, TaskStepConfig) and config.coordination is not None:
        decomposition = config.coordination.decomposition
        where = "config.coordination.decomposition"
        found = dag_problems(decomposition, where) if decomposition else []
        return [_node_issue("node_config", node.id, f"{p.field}: {p.message}") for p in found]
    return []


def validate_workflow(
    nodes: Sequence[WorkflowNode], edges: Sequence[WorkflowEdge]
) -> list[ValidationIssue]:
    """Every broken rule; an empty list means the workflow can be activated."""
    graph = Graph.of(nodes, edges)
    issues = structural_issues(nodes, edges)
    issues += _endpoint_issues(graph)
    issues += _edge_type_issues(graph)
    issues += _branch_issues(graph)
    for node in graph.of_type(NodeType.TASK):
        if not node.config.get("title"):
            issues.append(_node_issue("task_title", node.id, "a task node needs a title"))
    issues += _reachability_issues(graph)
    issues += _cycle_issues(graph)
    return issues


def _endpoint_issues(graph: Graph) -> list[ValidationIssue]:
    issues: list[ValidationIssue] = []
    for node_type, rule in ((NodeType.START, "start_count"), (NodeType.END, "end_count")):
        found = graph.of_type(node_type)
        if len(found) != 1:
            names = ", ".join(repr(n.id) for n in found) or "none"
            issues.append(
                ValidationIssue(
                    rule=rule,
                    message=f"exactly one {node_type.value} node is required (found {names})",
                    node_id=found[1].id if len(found) > 1 else None,
                )
            )
    for start in graph.of_type(NodeType.START):
        for edge in graph.incoming[start.id]:
            issues.append(_edge_issue("start_incoming", edge.id, "leads into the start node"))
    for end in graph.of_type(NodeType.END):
        for edge in graph.outgoing[end.id]:
            issues.append(_edge_issue("end_outgoing", edge.id, "leaves the end node"))
    return issues


def _edge_type_issues(graph: Graph) -> list[ValidationIssue]:
    issues: list[ValidationIssue] = []
    for edge in graph.edges:
        source = graph.nodes[edge.source].type
        if edge.type in _BRANCH_EDGES and source is not NodeType.CONDITIONAL:
            issues.append(
                _edge_issue("edge_type", edge.id, f"{edge.type.value} must leave a conditional")
            )
        if edge.type is EdgeType.PARALLEL_BRANCH and source is not NodeType.PARALLEL_SPLIT:
            issues.append(
                _edge_issue("edge_type", edge.id, "parallel_branch must leave a parallel_split")
            )
    return issues


def _branch_issues(graph: Graph) -> list[ValidationIssue]:
    issues: list[ValidationIssue] = []
    for node in graph.of_type(NodeType.CONDITIONAL):
        out = graph.outgoing[node.id]
        true = sum(e.type is EdgeType.CONDITIONAL_TRUE for e in out)
        false = sum(e.type is EdgeType.CONDITIONAL_FALSE for e in out)
        if true != 1 or false != 1 or len(out) != 2:
            issues.append(
                _node_issue(
                    "conditional_branches",
                    node.id,
                    "needs exactly one conditional_true and one conditional_false edge and "
                    f"no other (has {true} true, {false} false, {len(out) - true - false} other)",
                )
            )
    for node in graph.of_type(NodeType.PARALLEL_SPLIT):
        out = graph.outgoing[node.id]
        branches = sum(e.type is EdgeType.PARALLEL_BRANCH for e in out)
        if branches < 2 or branches != len(out):
            issues.append(
                _node_issue(
                    "parallel_split_branches",
                    node.id,
                    f"needs 2 or more parallel_branch edges and no other (has {branches} "
                    f"parallel_branch, {len(out) - branches} other)",
                )
            )
    for node in graph.of_type(NodeType.PARALLEL_JOIN):
        if len(graph.incoming[node.id]) < 2:
            issues.append(
                _node_issue("parallel_join_inputs", node.id, "needs 2 or more incoming edges")
            )
    return issues


def _reachability_issues(graph: Graph) -> list[ValidationIssue]:
    starts = graph.of_type(NodeType.START)
    if len(starts) != 1:
        return []  # reported by start_count; reachability has no root to start from
    reached = {starts[0].id}
    frontier = [starts[0].id]
    while frontier:
        for edge in graph.outgoing[frontier.pop()]:
            if edge.target not in reached:
                reached.add(edge.target)
                frontier.append(edge.target)
    issues: list[ValidationIssue] = []
    for node in graph.nodes.values():
        if node.id in reached:
            continue
        if node.type is NodeType.END:
            issues.append(_node_issue("end_unreachable", node.id, "not reachable from start"))
        else:
            issues.append(_node_issue("unreachable", node.id, "not reachable from start"))
    return issues


def _cycle_issues(graph: Graph) -> list[ValidationIssue]:
    """One issue per back edge found by a depth-first walk, naming the cycle it closes."""
    return [
        _edge_issue("cycle", edge_id, "closes the cycle " + " -> ".join(loop))
        for edge_id, loop in closing_cycles(
            graph.nodes, lambda node: ((e.id, e.target) for e in graph.outgoing[node])
        )
    ]


def topological_order(graph: Graph) -> list[str]:
    """Node ids, each after all of its predecessors; ties keep definition order. Nodes on
    or behind a cycle are left out (validation rejects cycles)."""
    position = {node_id: i for i, node_id in enumerate(graph.nodes)}
    waiting = {node_id: len(graph.incoming[node_id]) for node_id in graph.nodes}
    ready = sorted((n for n, count in waiting.items() if count == 0), key=position.__getitem__)
    order: list[str] = []
    while ready:
        node_id = ready.pop(0)
        order.append(node_id)
        for edge in graph.outgoing[node_id]:
            waiting[edge.target] -= 1
            if waiting[edge.target] == 0:
                ready.append(edge.target)
                ready.sort(key=position.__getitem__)
    return order


def export_yaml(
    name: str, description: str, nodes: Sequence[WorkflowNode], edges: Sequence[WorkflowEdge]
) -> str:
    """A flat step list in topological order, each step naming the steps it depends on.
    Start and end are structural markers and are left out, and so are edges to them."""
    graph = Graph.of(nodes, edges)
    markers = {n.id for n in nodes if n.type in (NodeType.START, NodeType.END)}
    steps: list[dict[str, Any]] = []
    for node_id in topological_order(graph):
        if node_id in markers:
            continue
        node = graph.nodes[node_id]
        step: dict[str, Any] = {"id": node.id, "type": node.type.value}
        if node.label:
            step["label"] = node.label
        step |= _export_config(node)
        depends_on = [e.source for e in graph.incoming[node_id] if e.source not in markers]
        if depends_on:
            step["depends_on"] = list(dict.fromkeys(depends_on))
        out = graph.outgoing[node_id]
        if node.type is NodeType.CONDITIONAL:
            for edge in out:
                if edge.type in _BRANCH_EDGES and edge.target not in markers:
                    key = "on_true" if edge.type is EdgeType.CONDITIONAL_TRUE else "on_false"
                    step.setdefault(key, []).append(edge.target)
        if node.type is NodeType.PARALLEL_SPLIT:
            step["branches"] = [e.target for e in out if e.target not in markers]
        steps.append(step)
    document = {"workflow": {"name": name, "description": description, "steps": steps}}
    import yaml  # here: an export is rare, and every start would pay for the import

    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


def _export_config(node: WorkflowNode) -> dict[str, Any]:
    """The config as the author wrote it; a join also states its (default) strategy."""
    config = NODE_CONFIGS[node.type].model_validate(node.config)
    exported = config.model_dump(mode="json", exclude_unset=True)
    if isinstance(config, ParallelJoinConfig):
        exported["join_strategy"] = config.join_strategy.value
    return exported
