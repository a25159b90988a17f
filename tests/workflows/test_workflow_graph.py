"""Workflow graphs: every validation rule (good and bad), topological order, YAML export,
and the activation plan (branches taken and skipped, joins, assignees)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import yaml

from app.core.requirements import NOTHING, leaves, satisfied
from app.workflows.engine.workflow_graph import (
    Graph,
    export_yaml,
    structural_issues,
    topological_order,
    validate_workflow,
)
from app.workflows.engine.workflow_plan import plan_execution
from app.workflows.schemas.workflows import WorkflowEdge, WorkflowNode


def node(node_id: str, node_type: str = "task", **config: Any) -> WorkflowNode:
    if node_type == "task":
        config.setdefault("title", f"do {node_id}")
    return WorkflowNode.model_validate({"id": node_id, "type": node_type, "config": config})


def edge(source: str, target: str, edge_type: str = "sequential") -> WorkflowEdge:
    return WorkflowEdge.model_validate(
        {"id": f"{source}-{target}", "source": source, "target": target, "type": edge_type}
    )


def linear() -> tuple[list[WorkflowNode], list[WorkflowEdge]]:
    return (
        [node("s", "start"), node("a"), node("e", "end")],
        [edge("s", "a"), edge("a", "e")],
    )


def diamond() -> tuple[list[WorkflowNode], list[WorkflowEdge]]:
    """start -> t1 -> split -> (t2, t3) -> join -> t4 -> end"""
    nodes = [
        node("s", "start"),
        node("t1"),
        node("split", "parallel_split"),
        node("t2"),
        node("t3"),
        node("join", "parallel_join"),
        node("t4"),
        node("e", "end"),
    ]
    edges = [
        edge("s", "t1"),
        edge("t1", "split"),
        edge("split", "t2", "parallel_branch"),
        edge("split", "t3", "parallel_branch"),
        edge("t2", "join"),
        edge("t3", "join"),
        edge("join", "t4"),
        edge("t4", "e"),
    ]
    return nodes, edges


def branching(condition: str = "env == 'prod'") -> tuple[list[WorkflowNode], list[WorkflowEdge]]:
    """start -> c -(true)-> yes -> after; c -(false)-> no -> after; after -> end"""
    return (
        [
            node("s", "start"),
            node("c", "conditional", condition_expression=condition),
            node("yes"),
            node("no"),
            node("after"),
            node("e", "end"),
        ],
        [
            edge("s", "c"),
            edge("c", "yes", "conditional_true"),
            edge("c", "no", "conditional_false"),
            edge("yes", "after"),
            edge("no", "after"),
            edge("after", "e"),
        ],
    )


def rules(nodes: list[WorkflowNode], edges: list[WorkflowEdge]) -> list[tuple[str, str | None]]:
    return [(i.rule, i.node_id or i.edge_id) for i in validate_workflow(nodes, edges)]


@pytest.mark.parametrize("shape", [linear, diamond, branching])
def test_good_graphs_validate(shape: Any) -> None:
    assert validate_workflow(*shape()) == []


def test_every_node_type_and_edge_type_together_validate() -> None:
    nodes, edges = diamond()
    nodes.insert(1, node("who", "agent_assignment", agent_name="ann", role="dev"))
    edges[0] = edge("s", "who")
    edges.insert(1, edge("who", "t1"))
    nodes[6] = node("join", "parallel_join", join_strategy="any")
    assert validate_workflow(nodes, edges) == []


BAD_CASES: list[tuple[str, Any, list[tuple[str, str | None]]]] = [
    (
        "duplicate node id",
        lambda n, e: ([*n, node("a")], e),
        [("duplicate_node_id", "a")],
    ),
    (
        "duplicate edge id",
        lambda n, e: (n, [*e, edge("s", "a")]),
        [("duplicate_edge_id", "s-a")],
    ),
    (
        "edge to a missing node",
        lambda n, e: (n, [*e, edge("a", "ghost")]),
        [("unknown_node", "a-ghost")],
    ),
    (
        "bad task config",
        lambda n, e: ([n[0], node("a", priority="urgent"), n[2]], e),
        [("node_config", "a")],
    ),
    (
        "unknown config key",
        lambda n, e: ([n[0], node("a", colour="red"), n[2]], e),
        [("node_config", "a")],
    ),
    (
        "condition that does not parse",
        lambda n, e: branching("env = 'prod'"),
        [("condition_syntax", "c")],
    ),
    (
        "no start",
        lambda n, e: (n[1:], e[1:]),
        [("start_count", None)],
    ),
    (
        "two starts",
        lambda n, e: ([*n, node("s2", "start")], [*e, edge("s2", "a")]),
        [("start_count", "s2")],
    ),
    (
        "no end",
        lambda n, e: (n[:2], e[:1]),
        [("end_count", None)],
    ),
    (
        "two ends",
        lambda n, e: ([*n, node("e2", "end")], [*e, edge("a", "e2")]),
        [("end_count", "e2")],
    ),
    (
        "edge into start",
        lambda n, e: (n, [*e, edge("a", "s")]),
        [("start_incoming", "a-s"), ("cycle", "a-s")],
    ),
    (
        "edge out of end",
        lambda n, e: ([*n, node("b")], [*e, edge("e", "b")]),
        [("end_outgoing", "e-b")],
    ),
    (
        "task without title",
        lambda n, e: ([n[0], node("a", title=""), n[2]], e),
        [("task_title", "a")],
    ),
    (
        "unreachable node",
        lambda n, e: ([*n, node("lost")], [*e, edge("lost", "e")]),
        [("unreachable", "lost")],
    ),
    (
        "end unreachable",
        lambda n, e: (n, e[:1]),
        [("end_unreachable", "e")],
    ),
    (
        "cycle",
        lambda n, e: ([*n, node("b")], [*e, edge("a", "b"), edge("b", "a")]),
        [("cycle", "b-a")],
    ),
    (
        "self loop",
        lambda n, e: (n, [*e, edge("a", "a")]),
        [("cycle", "a-a")],
    ),
]


@pytest.mark.parametrize(("case", "mutate", "expected"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_graphs_name_the_rule_and_the_culprit(
    case: str, mutate: Any, expected: list[tuple[str, str | None]]
) -> None:
    nodes, edges = mutate(*linear())
    found = rules(nodes, edges)
    for issue in expected:
        assert issue in found, found


def test_issue_messages_name_the_node_or_edge() -> None:
    nodes, edges = branching("env ==")
    [issue] = validate_workflow(nodes, edges)
    assert issue.node_id == "c" and "'c'" in issue.message
    assert "condition_expression" in issue.message and "position 6" in issue.message


def test_conditional_needs_one_true_and_one_false_edge() -> None:
    nodes, edges = branching()
    assert ("conditional_branches", "c") in rules(nodes, [e for e in edges if e.target != "no"])
    two_true = [edge("c", "no", "conditional_true") if e.target == "no" else e for e in edges]
    assert ("conditional_branches", "c") in rules(nodes, two_true)
    extra = [*edges, edge("c", "after")]
    assert ("conditional_branches", "c") in rules(nodes, extra)


def test_branch_edges_must_leave_the_right_node_type() -> None:
    nodes, edges = linear()
    assert ("edge_type", "s-a") in rules(nodes, [edge("s", "a", "conditional_true"), edges[1]])
    assert ("edge_type", "s-a") in rules(nodes, [edge("s", "a", "parallel_branch"), edges[1]])


def test_parallel_split_needs_two_branches_and_join_two_inputs() -> None:
    nodes, edges = diamond()
    one_branch = [e for e in edges if e.id != "split-t3"] + [edge("s", "t3")]
    assert ("parallel_split_branches", "split") in rules(nodes, one_branch)
    sequential_branch = [edge("split", "t3") if e.id == "split-t3" else e for e in edges]
    assert ("parallel_split_branches", "split") in rules(nodes, sequential_branch)
    one_input = [e for e in edges if e.id != "t3-join"] + [edge("t3", "t4")]
    assert ("parallel_join_inputs", "join") in rules(nodes, one_input)


def test_structural_issues_leave_semantic_rules_to_validation() -> None:
    nodes, edges = linear()
    unfinished = [nodes[0], node("a", title="")]  # no end, untitled task: a draft
    assert structural_issues(unfinished, edges[:1]) == []
    assert validate_workflow(unfinished, edges[:1]) != []


def test_topological_order_puts_every_node_after_its_predecessors() -> None:
    nodes, edges = diamond()
    nodes = [nodes[7], nodes[3], *nodes[:3], *nodes[4:7]]  # definition order shuffled
    order = topological_order(Graph.of(nodes, edges))
    assert order == ["s", "t1", "split", "t2", "t3", "join", "t4", "e"]
    assert all(order.index(e.source) < order.index(e.target) for e in edges)


def test_yaml_export_of_a_diamond() -> None:
    nodes, edges = diamond()
    nodes[3] = node("t2", title="Backend", priority="high")
    document = yaml.safe_load(export_yaml("Release", "ship it", nodes, edges))
    workflow = document["workflow"]
    assert workflow["name"] == "Release" and workflow["description"] == "ship it"
    assert workflow["steps"] == [
        {"id": "t1", "type": "task", "title": "do t1"},
        {"id": "split", "type": "parallel_split", "depends_on": ["t1"], "branches": ["t2", "t3"]},
        {
            "id": "t2",
            "type": "task",
            "title": "Backend",
            "priority": "high",
            "depends_on": ["split"],
        },
        {"id": "t3", "type": "task", "title": "do t3", "depends_on": ["split"]},
        {"id": "join", "type": "parallel_join", "join_strategy": "all", "depends_on": ["t2", "t3"]},
        {"id": "t4", "type": "task", "title": "do t4", "depends_on": ["join"]},
    ]


def test_yaml_export_states_conditions_and_their_branches() -> None:
    steps = yaml.safe_load(export_yaml("b", "", *branching()))["workflow"]["steps"]
    assert steps[0] == {
        "id": "c",
        "type": "conditional",
        "condition_expression": "env == 'prod'",
        "on_true": ["yes"],
        "on_false": ["no"],
    }
    assert steps[-1]["depends_on"] == ["yes", "no"]


# -- the activation plan -------------------------------------------------------------------


@pytest.mark.parametrize(("env", "taken", "skipped"), [("prod", "yes", "no"), ("dev", "no", "yes")])
def test_a_conditional_takes_one_branch_and_skips_the_other(
    env: str, taken: str, skipped: str
) -> None:
    plan = plan_execution(Graph.of(*branching()), {"env": env})
    assert plan.node_status[taken] == "pending" and plan.node_status[skipped] == "skipped"
    assert plan.node_status["c"] == "completed" and plan.node_status["e"] == "completed"
    by_node = {t.node_id: t for t in plan.tasks}
    assert set(by_node) == {taken, "after"}
    assert by_node["after"].waits_for == taken  # the skipped branch is not waited for


def test_everything_behind_an_untaken_branch_is_skipped() -> None:
    nodes, edges = branching()
    nodes.insert(4, node("no2"))
    edges = [e for e in edges if e.id != "no-after"] + [edge("no", "no2"), edge("no2", "after")]
    plan = plan_execution(Graph.of(nodes, edges), {"env": "prod"})
    assert plan.node_status["no"] == plan.node_status["no2"] == "skipped"


@pytest.mark.parametrize(
    ("strategy", "waits_for", "ready_after_t2"),
    [("all", {"all": ["t2", "t3"]}, False), ("any", {"any": ["t2", "t3"]}, True)],
)
def test_parallel_join_all_and_any(strategy: str, waits_for: Any, ready_after_t2: bool) -> None:
    nodes, edges = diamond()
    nodes[5] = node("join", "parallel_join", join_strategy=strategy)
    plan = plan_execution(Graph.of(nodes, edges), {})
    by_node = {t.node_id: t for t in plan.tasks}
    assert [t.node_id for t in plan.tasks] == ["t1", "t2", "t3", "t4"]
    assert by_node["t1"].waits_for == NOTHING
    assert by_node["t2"].waits_for == by_node["t3"].waits_for == "t1"
    assert by_node["t4"].waits_for == waits_for
    assert leaves(by_node["t4"].waits_for) == ["t2", "t3"]
    assert satisfied(by_node["t4"].waits_for, {"t1", "t2"}) is ready_after_t2
    assert satisfied(by_node["t4"].waits_for, {"t1", "t2", "t3"}) is True


def test_a_branch_without_tasks_lets_an_any_join_pass_at_once() -> None:
    nodes, edges = diamond()
    nodes[5] = node("join", "parallel_join", join_strategy="any")
    edges = [e for e in edges if e.target != "t3" and e.source != "t3"]
    edges += [edge("split", "join", "parallel_branch"), edge("s", "t3"), edge("t3", "e")]
    plan = plan_execution(Graph.of(nodes, edges), {})
    t4 = {t.node_id: t.waits_for for t in plan.tasks}["t4"]
    assert satisfied(t4, {"t1"})  # the empty branch is done as soon as the split is


def test_agent_assignment_flows_downstream_until_another_one() -> None:
    nodes = [
        node("s", "start"),
        node("who", "agent_assignment", agent_name="ann"),
        node("a"),
        node("b", assigned_to="bob"),
        node("other", "agent_assignment", agent_name="cy"),
        node("c"),
        node("e", "end"),
    ]
    order = ["s", "who", "a", "b", "other", "c", "e"]
    edges = [edge(x, y) for x, y in itertools.pairwise(order)]
    plan = plan_execution(Graph.of(nodes, edges), {})
    assert {t.node_id: t.assigned_to for t in plan.tasks} == {"a": "ann", "b": "bob", "c": "cy"}
