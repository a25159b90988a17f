"""Pure rules over directed graphs given as adjacency, shared by the workflow definitions'
graph and a coordination's subtask DAG: the cycles a graph holds, and its topological
layers. Nodes are any hashable values; the callers keep their own vocabulary of issues."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

N = TypeVar("N", bound=Hashable)
E = TypeVar("E")


def closing_cycles(
    nodes: Iterable[N], outgoing: Callable[[N], Iterable[tuple[E, N]]]
) -> list[tuple[E, list[N]]]:
    """Each edge (as `outgoing` labels it) that closes a cycle in a depth-first walk from
    `nodes` in their order, with the cycle it closes: the path from the node it returns to,
    around, and back to that node (`[a, b, a]`; a self-loop is `[a, a]`). An acyclic graph
    gives none; each cycle is named at least once."""
    found: list[tuple[E, list[N]]] = []
    state: dict[N, int] = {}  # 1: on the current path, 2: done
    for root in nodes:
        if root in state:
            continue
        path: list[N] = [root]
        stack = [iter(outgoing(root))]
        state[root] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            label, target = step
            if state.get(target) == 1:
                found.append((label, [*path[path.index(target) :], target]))
            elif target not in state:
                state[target] = 1
                path.append(target)
                stack.append(iter(outgoing(target)))
    return found


def topological_layers(nodes: Sequence[N], predecessors: Mapping[N, Iterable[N]]) -> list[list[N]]:
    """The nodes in layers: the first holds those with no predecessor, each next one those
    whose predecessors all sit in earlier layers, so a layer's nodes may run side by side.
    Within a layer, nodes keep their order in `nodes`. Nodes on or behind a cycle are left
    out (callers reject cycles first); predecessors that are not in `nodes` are ignored."""
    known = set(nodes)
    waiting = {n: {p for p in predecessors.get(n, ()) if p in known} for n in nodes}
    layers: list[list[N]] = []
    placed: set[N] = set()
    while True:
        layer = [n for n in nodes if n not in placed and waiting[n] <= placed]
        if not layer:
            return layers
        layers.append(layer)
        placed.update(layer)
