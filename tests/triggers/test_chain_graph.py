"""Chains saved into a cycle, or into a path too long, are refused naming the target and
spelling the path; anything else is accepted."""

from __future__ import annotations

import pytest

from app.core.errors import ValidationFailed
from app.core.vocabulary import TargetKind
from app.triggers.engine.chain_graph import MAX_CHAIN_DEPTH, ChainEdge, Node, check


def agent(name: str) -> Node:
    return Node(TargetKind.RUN, name)


def workflow(name: str) -> Node:
    return Node(TargetKind.WORKFLOW, name)


def chain(trigger_id: str, source: Node, target: Node) -> ChainEdge:
    return ChainEdge(trigger_id, source, target)


def refusal(edge: ChainEdge, others: list[ChainEdge]) -> str:
    with pytest.raises(ValidationFailed) as refused:
        check(edge, others)
    [error] = refused.value.errors
    assert error.field == "body.target"
    return error.message


def test_a_chain_onto_its_own_source_is_a_cycle() -> None:
    message = refusal(chain("t1", agent("a"), agent("a")), [])
    assert message == "the chain would make a cycle: agent 'a' → agent 'a'"


def test_a_cycle_through_other_chains_and_a_workflow_is_spelled_out() -> None:
    others = [chain("t1", agent("a"), workflow("w")), chain("t2", workflow("w"), agent("b"))]
    message = refusal(chain("t3", agent("b"), agent("a")), others)
    assert message.endswith("agent 'b' → agent 'a' → workflow 'w' → agent 'b'")


def test_a_diamond_is_not_a_cycle() -> None:
    others = [
        chain("t1", agent("a"), agent("b")),
        chain("t2", agent("a"), agent("c")),
        chain("t3", agent("b"), agent("d")),
    ]
    check(chain("t4", agent("c"), agent("d")), others)


def test_saving_a_chain_again_replaces_its_old_edge() -> None:
    """A patch re-checks the trigger without the edge it is replacing."""
    others = [chain("t1", agent("a"), agent("b")), chain("t2", agent("b"), agent("c"))]
    check(chain("t2", agent("b"), agent("d")), others)
    refusal(chain("t2", agent("b"), agent("a")), others)


def test_the_longest_path_through_the_new_chain_is_bounded() -> None:
    names = [f"a{i}" for i in range(MAX_CHAIN_DEPTH + 2)]
    before = [chain(f"t{i}", agent(names[i]), agent(names[i + 1])) for i in range(2)]
    after = [
        chain(f"u{i}", agent(names[i]), agent(names[i + 1])) for i in range(3, MAX_CHAIN_DEPTH)
    ]
    at_limit = chain("new", agent(names[2]), agent(names[3]))
    check(at_limit, before + after)  # exactly MAX_CHAIN_DEPTH chains end to end
    longer = [*after, chain("v", agent(names[-2]), agent(names[-1]))]
    message = refusal(at_limit, before + longer)
    assert f"a path of {MAX_CHAIN_DEPTH + 1} chains, over the limit of {MAX_CHAIN_DEPTH}" in message
    assert message.endswith(" → ".join(f"agent '{n}'" for n in names))
