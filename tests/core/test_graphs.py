"""The shared graph rules on plain adjacency: the cycles a depth-first walk closes, and
topological layers."""

from __future__ import annotations

import pytest

from app.core.graphs import closing_cycles, topological_layers

Adjacency = dict[str, list[str]]

CYCLES = [
    # successors, (edge, cycle) per back edge
    ({"a": ["b"], "b": ["c"], "c": []}, []),
    ({"a": ["a"]}, [("a-a", ["a", "a"])]),
    ({"a": ["b"], "b": ["a"]}, [("b-a", ["a", "b", "a"])]),
    ({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}, []),  # a diamond is no cycle
    ({"a": ["b"], "b": ["c"], "c": ["b"]}, [("c-b", ["b", "c", "b"])]),  # behind a's entry
]


@pytest.mark.parametrize(("successors", "closed"), CYCLES)
def test_closing_cycles(successors: Adjacency, closed: list[tuple[str, list[str]]]) -> None:
    found = closing_cycles(successors, lambda n: ((f"{n}-{t}", t) for t in successors[n]))
    assert found == closed


LAYERS = [
    # nodes, predecessors, layers
    (["a", "b", "c"], {}, [["a", "b", "c"]]),
    (["c", "b", "a"], {"b": ["a"], "c": ["b"]}, [["a"], ["b"], ["c"]]),
    (["d", "a", "b", "c"], {"b": ["a"], "c": ["a"], "d": ["b", "c"]}, [["a"], ["b", "c"], ["d"]]),
    (["a", "b"], {"b": ["elsewhere"]}, [["a", "b"]]),  # unknown predecessors are ignored
    (["a", "b", "c", "d"], {"b": ["c"], "c": ["b"], "d": ["c"]}, [["a"]]),  # cycle and behind
]


@pytest.mark.parametrize(("nodes", "predecessors", "layers"), LAYERS)
def test_topological_layers(
    nodes: list[str], predecessors: Adjacency, layers: list[list[str]]
) -> None:
    assert topological_layers(nodes, predecessors) == layers
